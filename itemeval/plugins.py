"""Plugins: scorers and providers from other packages, named by entry point or `module:attribute`.

A study names a plugin in one of two ways:

* an entry-point name of its group, declared by an installed distribution
  (`[project.entry-points."itemeval.scorers"] unit_match = "mypkg.scorers:unit_match"`);
  groups: `itemeval.scorers` and `itemeval.providers`;
* a reference `module:attribute` (`mypkg.scorers:unit_match`), imported as it is, from whatever
  the process can import.

Built-in names (`auto`, `exact_match`, ..., `openai`, `anthropic`, ...) always mean the built-in;
an entry point cannot replace one. Loading imports code, so it runs once per process and name
(cached); every failure is a `ConfigError` naming the field and what to do. The same names are
resolved again in each Ray worker, which must be able to import the same code (see
docs/study.md, "Plugins").
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
import inspect
import re
import sys
import threading
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from itemeval._util.arrow_start import restore_pandas_probe
from itemeval.errors import ConfigError, Problem

SCORER_GROUP = "itemeval.scorers"
PROVIDER_GROUP = "itemeval.providers"

_IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]*"
_REFERENCE = re.compile(rf"^{_IDENTIFIER}(\.{_IDENTIFIER})*:{_IDENTIFIER}(\.{_IDENTIFIER})*\Z")
_ENTRY_POINT_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*\Z")

_lock = threading.Lock()
_loaded: dict[tuple[str, str], Plugin] = {}


@dataclass(frozen=True, slots=True)
class Plugin:
    """A loaded plugin: what the study wrote, the object, and where it comes from."""

    name: str  # as written: an entry-point name or `module:attribute`
    obj: Any
    target: str  # `module:qualname` of the object as defined
    distribution: str | None = None  # entry points: the distribution that declares it
    version: str | None = None  # ... and its version

    @property
    def short_name(self) -> str:
        """The entry-point name, or the attribute's name for a reference."""
        if not is_reference(self.name):
            return self.name
        return self.name.rsplit(":", 1)[-1].rsplit(".", 1)[-1]


def is_reference(name: str) -> bool:
    """`module:attribute` (as opposed to an entry-point or built-in name)."""
    return ":" in name


def syntax_problem(name: str) -> str | None:
    """Why `name` cannot name a plugin (None when it can)."""
    if is_reference(name):
        if not _REFERENCE.match(name):
            return f"{name!r} is not a reference of the form package.module:attribute"
        if name.split(":", 1)[0] == "__main__":
            return "a plugin cannot live in __main__: worker processes have another __main__"
        return None
    if not _ENTRY_POINT_NAME.match(name):
        return f"{name!r} is neither a name nor a package.module:attribute reference"
    return None


def entry_point_names(group: str) -> list[str]:
    """The names installed distributions declare in `group`, sorted."""
    return sorted({ep.name for ep in importlib.metadata.entry_points(group=group)})


def load_plugin(
    group: str,
    name: str,
    *,
    what: str,
    field: str | None = None,
    builtin: Collection[str] = (),
) -> Plugin:
    """The plugin `name` of `group`. `what` says what it is and `builtin` lists the built-in
    names, for messages ("unknown scorer 'exact' (hint: did you mean 'exact_match'? ...)")."""
    key = (group, name)
    plugin = _loaded.get(key)
    if plugin is not None:
        return plugin
    with _lock:
        plugin = _loaded.get(key)
        if plugin is None:
            plugin = _loaded[key] = _load(group, name, what, field, builtin)
    if "pandas" in sys.modules:  # a plugin that uses pandas may hand pyarrow its objects
        restore_pandas_probe()
    return plugin


def _load(group: str, name: str, what: str, field: str | None, builtin: Collection[str]) -> Plugin:
    problem = syntax_problem(name)
    if problem is not None:
        raise ConfigError(Problem(problem, field=field))
    if is_reference(name):
        module_name, attribute = name.split(":", 1)
        obj = _attribute(_import(module_name, name, what, field), attribute, name, what, field)
        return Plugin(name, obj, target_of(obj, module_name))
    found = [ep for ep in importlib.metadata.entry_points(group=group) if ep.name == name]
    if not found:
        installed = entry_point_names(group)
        close = difflib.get_close_matches(name, [*builtin, *installed], n=1)
        known = [f"built-in {what}s: {', '.join(sorted(builtin))}"] if builtin else []
        if installed:
            known.append(f"installed plugins: {', '.join(installed)}")
        else:
            known.append(f"no plugins installed (entry-point group {group})")
        raise ConfigError(
            Problem(
                f"unknown {what} {name!r}",
                field=field,
                hint=(f"did you mean {close[0]!r}? " if close else "")
                + "; ".join(known)
                + "; or name a package.module:attribute",
            )
        )
    distributions = sorted({_distribution(ep) for ep in found})
    if len(distributions) > 1:
        raise ConfigError(
            Problem(
                f"{what} {name!r} is declared by several installed packages: "
                + ", ".join(distributions),
                field=field,
                hint="uninstall all but one, or name it as package.module:attribute",
            )
        )
    entry = found[0]
    try:
        obj = entry.load()
    except Exception as exc:
        raise ConfigError(
            Problem(
                f"{what} plugin {name!r} ({entry.value}) failed to load: "
                f"{type(exc).__name__}: {exc}",
                field=field,
                hint=f"fix or reinstall {distributions[0]}",
            )
        ) from None
    dist = entry.dist
    return Plugin(
        name,
        obj,
        target_of(obj, entry.module),
        distribution=dist.name if dist is not None else None,
        version=dist.version if dist is not None else None,
    )


def _distribution(entry: importlib.metadata.EntryPoint) -> str:
    dist = entry.dist
    return f"{dist.name} {dist.version}" if dist is not None else entry.value


def _import(module_name: str, name: str, what: str, field: str | None) -> Any:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or module_name
        raise ConfigError(
            Problem(
                f"{what} {name!r}: cannot import {module_name} (no module named {missing!r})",
                field=field,
                hint="install the package that provides it, or put it on PYTHONPATH; on a "
                "cluster, ship it with the job's runtime_env (py_modules, pip or working_dir)",
            )
        ) from None
    except Exception as exc:
        raise ConfigError(
            Problem(
                f"{what} {name!r}: importing {module_name} failed: {type(exc).__name__}: {exc}",
                field=field,
            )
        ) from None


def _attribute(module: Any, attribute: str, name: str, what: str, field: str | None) -> Any:
    obj = module
    for part in attribute.split("."):
        if not hasattr(obj, part):
            choices = [n for n in dir(obj) if not n.startswith("_")]
            close = difflib.get_close_matches(part, choices, n=1)
            raise ConfigError(
                Problem(
                    f"{what} {name!r}: {getattr(obj, '__name__', attribute)} has no {part!r}",
                    field=field,
                    hint=f"did you mean {close[0]!r}?" if close else None,
                )
            )
        obj = getattr(obj, part)
    return obj


def target_of(obj: Any, fallback_module: str) -> str:
    """`module:qualname` where `obj` is defined (what identifies it, however it was named)."""
    module = getattr(obj, "__module__", None) or fallback_module
    qualname = getattr(obj, "__qualname__", None) or type(obj).__qualname__
    return f"{module}:{qualname}"


def module_source(obj: Any) -> str | None:
    """The source text of the module that defines `obj`, or None when it cannot be read."""
    module = inspect.getmodule(obj)
    if module is None:
        return None
    try:
        return inspect.getsource(module)
    except (OSError, TypeError):
        return None

"""Custom scorers: plugins beside the built-ins, their identity, and the one `score` dispatch.

A custom scorer is a function `(text, target, modality) -> Score`, like the built-ins, named in
a study by an entry point of the group `itemeval.scorers` or as `package.module:function`
(`itemeval.plugins`). Its identity enters its grade condition id, so changing the scorer grades
again:

* `@itemeval.scorer(version="2")` (or `name=`): the version you give is the identity; bump it when
  the scorer's behaviour changes;
* without a version, the sha256 of the source of the module that defines the function (any edit
  of that module, helpers included, is a new scorer).

Payloads: built-ins keep `{"stage": "grade", "scorer": <name>, "version": SCORER_VERSION}`
(their ids never change); a custom scorer's is `{"stage": "grade", "scorer": "<module>:<qualname>",
"version": <version>}` or `{..., "source_sha256": <hash>}`: where the function is defined, not
how the study named it. Its slug is its name: `name=`, else the entry-point or function name.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from itemeval.errors import ConfigError, Problem, ScorerError
from itemeval.ids import sha256_hex, slugify
from itemeval.plugins import SCORER_GROUP, is_reference, load_plugin, module_source
from itemeval.scoring._verifiable import SCORER_VERSION, SCORERS, Score

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class ScorerSpec:
    """What `@itemeval.scorer` attaches to a function."""

    name: str | None = None
    version: str | None = None


def scorer(*, name: str | None = None, version: str | int | None = None) -> Callable[[F], F]:
    """Mark a function as an itemeval scorer with a readable `name` and a `version` (its
    identity in condition ids; without one, the source of its module is)."""
    if name is not None and slugify(name) != name.lower():
        raise ValueError(f"scorer name {name!r}: use letters, digits, '.', '_' and '-' only")

    def mark(function: F) -> F:
        function.itemeval_scorer = ScorerSpec(  # type: ignore[attr-defined]
            name, None if version is None else str(version)
        )
        return function

    return mark


@dataclass(frozen=True, slots=True)
class ScorerIdentity:
    """A scorer as a condition: the name the study uses, its slug, the payload of its id."""

    reference: str  # a built-in name, an entry-point name, or module:function
    slug: str
    payload: dict[str, Any]
    builtin: bool


def scorer_identity(reference: str, *, field: str | None = None) -> ScorerIdentity:
    """The identity of the scorer `reference` names (imports a plugin; `ConfigError` if it
    cannot be used)."""
    if reference in SCORERS:
        builtin = {"stage": "grade", "scorer": reference, "version": SCORER_VERSION}
        return ScorerIdentity(reference, reference, builtin, builtin=True)
    plugin = load_plugin(SCORER_GROUP, reference, what="scorer", field=field, builtin=SCORERS)
    function = plugin.obj
    if not callable(function):
        raise ConfigError(
            Problem(
                f"scorer {reference!r} is a {type(function).__name__}, not a function",
                field=field,
                hint="point it at a function (text, target, modality) -> itemeval.Score",
            )
        )
    spec = getattr(function, "itemeval_scorer", None)
    spec = spec if isinstance(spec, ScorerSpec) else ScorerSpec()
    name = spec.name or (plugin.short_name if is_reference(reference) else reference)
    payload: dict[str, Any] = {"stage": "grade", "scorer": plugin.target}
    if spec.version is not None:
        payload["version"] = spec.version
    else:
        source = module_source(function)
        if source is None:
            raise ConfigError(
                Problem(
                    f"scorer {reference!r}: the source of {plugin.target} cannot be read, so "
                    "nothing says when it changes",
                    field=field,
                    hint="give it a version: @itemeval.scorer(version='1'), and bump it when "
                    "its behaviour changes",
                )
            )
        payload["source_sha256"] = sha256_hex(source)
    return ScorerIdentity(reference, slugify(name), payload, builtin=False)


def score(scorer: str, text: str, target: str, modality: str | None) -> Score:
    """Score one solution text with the scorer a study names (built-in or custom)."""
    builtin = SCORERS.get(scorer)
    if builtin is not None:
        return builtin(text, target, modality)
    function = load_plugin(SCORER_GROUP, scorer, what="scorer").obj
    try:
        result = function(text, target, modality)
    except Exception as exc:
        raise ScorerError(f"scorer {scorer!r} raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(result, Score):
        raise ScorerError(
            f"scorer {scorer!r} returned a {type(result).__name__}, not an itemeval.Score"
        )
    if (
        not isinstance(result.score, int | float)
        or isinstance(result.score, bool)
        or not math.isfinite(result.score)
        or not isinstance(result.correct, bool)
        or not (result.extracted is None or isinstance(result.extracted, str))
    ):
        raise ScorerError(
            f"scorer {scorer!r} returned {result!r}: score must be a finite number, correct a "
            "bool, extracted a str or None"
        )
    return result

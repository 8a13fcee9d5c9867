"""Every `itemeval` command goes through the Python API: the CLI parses arguments, calls
`itemeval.api` (the names `itemeval` exports) and prints.

An AST check reads every module of itemeval/cli/: the itemeval modules it may import are
`itemeval`, `itemeval.api`, `itemeval.errors` and `itemeval.cli.*`; an import under
`if TYPE_CHECKING:` (annotations only; nothing runs) is allowed too. Anything else is listed
below by the names it brings in, with the reason. A behavioural check holds that every command's
function is defined in itemeval/cli/ (so the AST check sees all of them) and that a command and
its API function do the same thing.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

import pytest

import itemeval
import itemeval.api
from itemeval.cli.main import COMMAND_MODULES, build_parser, main

CLI = Path(itemeval.__file__).parent / "cli"
REPO = Path(itemeval.__file__).resolve().parents[1]
ALLOWED_MODULES = ("itemeval", "itemeval.api", "itemeval.errors")

#: (module of itemeval/cli/, imported name) -> why it may bypass itemeval.api. Names, not module
#: paths: a module that moves keeps its entry.
EXCEPTIONS: dict[tuple[str, str], str] = {
    # main.py is the process, not a command: what every command's errors and exit go through.
    ("main.py", "redact"): "every error the entry point prints is redacted first",
    ("main.py", "access_problem"): "explains the storage failure any command can meet",
    ("main.py", "skip_pandas_probe"): "process start-up (pyarrow without the pandas probe)",
    ("main.py", "limit_malloc_arenas"): "process start-up (few malloc arenas)",
    ("main.py", "process_ends_after_run"): "process plumbing: a local Ray ends with the process",
    # sim-server serves the simulated provider, a product of its own with no study: its
    # settings and its server are the simulator's public API.
    ("sim.py", "SimSettings"): "the simulator's settings, built from the flags",
    ("sim.py", "ServerLimits"): "the simulated server's rate limits, from the flags",
    ("sim.py", "start_server"): "starts the simulator's HTTP server",
    ("sim.py", "safe_load"): "reads the --models YAML file",
    ("sim.py", "yaml"): "its YAMLError, for a --models file that is not YAML",
    ("sim.py", "ValidationError"): "pydantic's error from SimSettings, turned into ConfigError",
}


def _type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and (
        (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
        or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING")
    )


def _imports(tree: ast.AST) -> list[tuple[str, str, int]]:
    """(module, name, line) of every import that runs, wherever it is (functions included)."""
    found: list[tuple[str, str, int]] = []

    def visit(node: ast.AST) -> None:
        if _type_checking_block(node):
            return
        if isinstance(node, ast.Import):
            found.extend((a.name, a.name, node.lineno) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"line {node.lineno}: relative import"
            found.extend((node.module or "", a.name, node.lineno) for a in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _bypasses(path: Path) -> list[str]:
    out = []
    for module, name, line in _imports(ast.parse(path.read_text(), str(path))):
        top = module.split(".")[0]
        if top in sys.stdlib_module_names or top == "__future__":
            continue
        if module in ALLOWED_MODULES or module.startswith("itemeval.cli."):
            continue
        if (path.name, name) in EXCEPTIONS:
            continue
        out.append(f"{path.name}:{line}: {name} from {module}")
    return out


def test_cli_modules_import_only_the_api():
    modules = sorted(CLI.glob("*.py"))
    assert len(modules) >= 12
    bypasses = [line for path in modules for line in _bypasses(path)]
    assert not bypasses, (
        "a command reaches past itemeval.api; move the logic into the API (itemeval/api/) and "
        "call it, or list a justified exception in EXCEPTIONS:\n" + "\n".join(bypasses)
    )


def test_every_listed_exception_is_still_needed():
    used = {
        (path.name, name)
        for path in CLI.glob("*.py")
        for _, name, _ in _imports(ast.parse(path.read_text()))
    }
    assert not set(EXCEPTIONS) - used, "stale entries: " + str(sorted(set(EXCEPTIONS) - used))


def test_the_check_sees_a_bypass(tmp_path):
    bad = tmp_path / "datasets.py"
    bad.write_text(
        "from typing import TYPE_CHECKING\n"
        "from itemeval.api import validate_dataset\n"
        "if TYPE_CHECKING:\n    from itemeval.datasets.format import Item\n"
        "def run():\n    from itemeval.store import compact\n    import pyarrow\n"
    )
    assert _bypasses(bad) == [
        "datasets.py:6: compact from itemeval.store",
        "datasets.py:7: pyarrow from pyarrow",
    ]


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (subparsers,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(subparsers.choices)


def test_every_command_runs_a_function_of_the_cli_package():
    commands = _commands()
    assert {"validate", "convert", "compact", "import", "limiters", "run", "view"} <= set(commands)
    for name, parser in commands.items():
        func = parser.get_default("func")
        assert func is not None, name
        assert func.__module__ in COMMAND_MODULES, (name, func.__module__)
    files = {f"itemeval.cli.{p.stem}" for p in CLI.glob("*.py")}
    assert files - set(COMMAND_MODULES) == {
        "itemeval.cli.__init__",
        "itemeval.cli.main",
        "itemeval.cli.options",
    }


def test_validate_prints_what_the_api_finds(capsys):
    paths = [str(REPO / "configs" / "datasets" / name) for name in ("arithmetic", "facts-tf")]
    found = [itemeval.validate_dataset(path) for path in paths]
    assert main(["validate", *paths]) == 0
    out = capsys.readouterr().out
    for report in found:
        modalities = ", ".join(f"{m} {n}" for m, n in sorted(report.by_modality.items()))
        assert f"{report.path}: ok\n  {report.title}: {report.items} items ({modalities})" in out
    assert f"2 paths, {sum(r.items for r in found)} items, 0 invalid" in out


def test_convert_writes_what_the_api_writes(tmp_path, capsys):
    source = str(REPO / "configs" / "datasets" / "facts-tf")
    args = {"dialect": "commoneval", "items_per_part": 20, "attributes": {"creator": "Me"}}
    written = itemeval.convert_dataset(source, str(tmp_path / "api"), **args)
    command = ["convert", source, "--out", str(tmp_path / "cli"), "--dialect", "commoneval"]
    assert main([*command, "--items-per-part", "20", "--set", "creator=Me"]) == 0
    out = capsys.readouterr().out
    assert f": {written.items} items (boolean 25, ternary 5) in {len(written.parts)} parts" in out
    assert (written.identifier, written.items, len(written.parts)) == ("facts-tf", 30, 2)
    api_files = sorted(p.relative_to(tmp_path / "api") for p in (tmp_path / "api").rglob("*"))
    cli_files = sorted(p.relative_to(tmp_path / "cli") for p in (tmp_path / "cli").rglob("*"))
    assert api_files == cli_files and len(api_files) >= 3
    for name in api_files:
        assert (tmp_path / "api" / name).read_bytes() == (tmp_path / "cli" / name).read_bytes()


def test_api_errors_name_the_argument(tmp_path):
    source = str(REPO / "configs" / "datasets" / "facts-tf")
    with pytest.raises(itemeval.ConfigError, match="field 'items_per_part'"):
        itemeval.convert_dataset(source, str(tmp_path / "out"), items_per_part=0)
    with pytest.raises(itemeval.ConfigError, match="unknown dialect 'plain'"):
        itemeval.convert_dataset(source, str(tmp_path / "out"), dialect="plain")
    assert not (tmp_path / "out").exists()


def test_limiters_lists_what_the_api_lists(ray_local, capsys):
    listed = itemeval.list_limiters()
    assert main(["limiters", "--json"]) == 0
    out = capsys.readouterr().out
    assert [info.name for info in listed] == [entry["name"] for entry in _json(out)]
    assert itemeval.remove_limiters(["itemeval-limiter-no-such-endpoint"]) == []


def _json(text: str) -> list[dict]:
    import json

    return json.loads(text)


def test_the_api_functions_are_public_names_of_itemeval():
    for name in ("validate_dataset", "convert_dataset", "compact_store", "import_sources"):
        assert name in itemeval.__all__
        assert getattr(itemeval, name) is getattr(itemeval.api, name)
    assert {"list_limiters", "remove_limiters"} <= set(itemeval.__all__)
    for name in itemeval.__all__:
        assert getattr(itemeval, name) is not None, name

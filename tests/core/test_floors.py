"""The floors of docs/architecture.md hold for the code's imports: every import between two of
`itemeval`'s packages goes from a higher floor to a lower one, so no two packages import each
other, directly or around a circle.

A package here is a directory or module directly under `itemeval/` (`statistics`, `errors`).
Every import counts, at the top of a module or inside a function, and so does a name a package's
`__init__` exports lazily from another package (a string `itemeval.<package>...` in its table);
an import under `if TYPE_CHECKING:` does not (it never runs: annotations only). The top-level
`itemeval/__init__.py` is left out: its lazy names (`itemeval.Study`) are the house's front door.
No other arrow is excused.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "itemeval"
NOT_PACKAGES = {"__init__", "__main__"}  # the front door and `python -m itemeval`


@cache
def _packages() -> frozenset[str]:
    names = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    names |= {p.stem for p in PACKAGE.glob("*.py")}
    return frozenset(names - NOT_PACKAGES)


def _floors() -> list[set[str]]:
    """The drawing under `## Floors` in docs/architecture.md, top floor first: each line names
    its packages, then (after three spaces or more) says what they are."""
    text = (ROOT / "docs/architecture.md").read_text()
    block = text.split("## Floors", 1)[1].split("```", 2)[1]
    floors = []
    for line in block.strip("\n").splitlines():
        if not line.strip() or line.startswith(" "):
            continue  # a description's continuation
        names = re.split(r"\s{3,}", line.strip(), maxsplit=1)[0].split()
        floors.append(set(names))
    return floors


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class _Imports(ast.NodeVisitor):
    """The `itemeval...` modules a module imports (its own relative imports resolved)."""

    def __init__(self, module: str, is_package: bool) -> None:
        self.module, self.is_package = module, is_package
        self.found: list[tuple[str, int]] = []

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        self.found += [(alias.name, node.lineno) for alias in node.names]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        if node.level:
            parts = self.module.split(".")
            parts = parts if self.is_package else parts[:-1]
            parts = parts[: len(parts) - node.level + 1]
            base = ".".join([*parts, *([node.module] if node.module else [])])
        self.found.append((base, node.lineno))
        self.found += [(f"{base}.{alias.name}", node.lineno) for alias in node.names]

    def visit_Constant(self, node: ast.Constant) -> None:
        # a lazy export's module path, in a package's `__init__` (`"Simulator": "itemeval.sim.."`)
        text = node.value
        if self.is_package and isinstance(text, str) and re.fullmatch(r"itemeval(\.\w+)+", text):
            self.found.append((text, node.lineno))


@cache
def _arrows() -> dict[tuple[str, str], list[str]]:
    """(importer, imported) -> where: every import from one package of `itemeval` to another."""
    packages = _packages()
    arrows: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT)
        parts = list(rel.with_suffix("").parts)
        if len(parts) < 2 or parts[1] in NOT_PACKAGES:
            continue
        is_package = parts[-1] == "__init__"
        module = ".".join(parts[:-1] if is_package else parts)
        visitor = _Imports(module, is_package)
        visitor.visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        for target, line in visitor.found:
            names = target.split(".")
            if names[0] != "itemeval" or len(names) < 2 or names[1] not in packages:
                continue
            if names[1] != parts[1]:
                arrows[(parts[1], names[1])].append(f"{rel}:{line} imports {target}")
    return arrows


def test_every_package_is_on_one_floor() -> None:
    floors = _floors()
    drawn = [name for floor in floors for name in floor]
    assert sorted(n for n in set(drawn) if drawn.count(n) > 1) == [], "on two floors"
    assert _packages() - set(drawn) == set(), "packages missing from the floors' drawing"
    assert set(drawn) - _packages() == set(), "the drawing names a package that is gone"


def test_imports_only_go_down() -> None:
    floor_of = {name: len(_floors()) - i for i, floor in enumerate(_floors()) for name in floor}
    up = [
        f"{a} (floor {floor_of[a]}) -> {b} (floor {floor_of[b]}): {where[0]}"
        + (f" (and {len(where) - 1} more)" if len(where) > 1 else "")
        for (a, b), where in sorted(_arrows().items())
        if a in floor_of and b in floor_of and floor_of[b] >= floor_of[a]
    ]
    assert up == [], "imports that do not go down a floor:\n" + "\n".join(up)


def test_no_import_circle_between_packages() -> None:
    """From the imports alone, whatever the drawing says: no package reaches itself."""
    graph: dict[str, set[str]] = defaultdict(set)
    for a, b in _arrows():
        graph[a].add(b)
    circles = []
    for start in sorted(graph):
        seen, stack = set(), [(start, [start])]
        while stack:
            node, path = stack.pop()
            for nxt in sorted(graph[node]):
                if nxt == start:
                    circles.append(" -> ".join([*path, start]))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*path, nxt]))
    assert circles == [], "import circles:\n" + "\n".join(sorted(set(circles)))

"""What a report shows, computed once from the store: `report_data(plan) -> ReportData`.

Every section comes from `cells` (the small columns of every grade and solution) through
`summary` and `difficulty`; `html` and `markdown` only render. The terminal leaderboard the
demo prints (`leaderboard_text`) is built from the same pieces.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from itemeval import __version__
from itemeval.export.report.difficulty import DatasetDifficulty, item_difficulty
from itemeval.export.report.summary import (
    Bootstrap,
    Cost,
    Errors,
    FacetTable,
    GraderAgreement,
    Leaderboard,
    costs,
    errors,
    facet_table,
    fmt_proportion,
    grader_agreement,
    leaderboard,
)
from itemeval.export.table.cells import StudyCells, read_cells
from itemeval.export.table.conditions import DesignFacets
from itemeval.export.table.fetch import ItemFetcher
from itemeval.planning import Plan
from itemeval.store import latest_manifest

if TYPE_CHECKING:
    from itemeval.irt.report import IrtSection


@dataclass(frozen=True)
class ReportData:
    """Everything a report shows, computed once."""

    study: str
    description: str | None
    store: str
    generated_at: str
    facets: DesignFacets
    datasets: list[tuple[str, int]]  # name, selected items
    bootstrap: Bootstrap
    leaderboard: Leaderboard
    by_prompt: FacetTable | None
    by_config: FacetTable | None
    by_dataset: FacetTable | None
    agreement: list[GraderAgreement]
    costs: list[Cost]
    errors: Errors
    difficulty: list[DatasetDifficulty]
    graded: int  # valid grades, every grader
    solutions: int  # logical solution rows
    usd: float  # generation + grading, logical rows
    prompt_cache_saved_usd: float = 0.0  # what providers' prompt caches saved on them
    batch_rows: int = 0  # rows answered through providers' batch APIs
    batch_saved_usd: float = 0.0  # what the batch prices saved on them
    last_run: dict[str, str] = field(default_factory=dict)
    version: str = __version__
    irt: IrtSection | None = None  # items item response theory finds suspicious (irt/report)


def report_data(plan: Plan, bootstrap: Bootstrap | None = None) -> ReportData:
    bootstrap = bootstrap or Bootstrap()
    cells = read_cells(plan)
    facets = cells.facets
    snapshots = {d.name: d.snapshot for d in plan.datasets if d.snapshot is not None}
    fetcher = ItemFetcher(plan.items, snapshots, ["input", "target", "difficulty"])

    def item_text(ids: list[str]) -> dict[str, tuple[str, str, float | None]]:
        table = fetcher.take(pa.array(ids, type=pa.string()))
        return {
            i: (text, target, difficulty)
            for i, text, target, difficulty in zip(
                ids,
                table.column("input").to_pylist(),
                table.column("target").to_pylist(),
                table.column("difficulty").to_pylist(),
                strict=True,
            )
        }

    cost_lines = costs(cells, plan.pricing)
    manifest = latest_manifest(plan.store)
    last_run = (
        {
            "run_id": manifest.run_id,
            "command": manifest.command,
            "outcome": manifest.outcome,
            "ended_at": str(manifest.ended_at or manifest.started_at),
        }
        if manifest is not None
        else {}
    )
    return ReportData(
        study=plan.study.study,
        description=plan.study.description,
        store=plan.store.root.url,
        generated_at=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        facets=facets,
        datasets=[(d.name, d.selected) for d in plan.datasets],
        bootstrap=bootstrap,
        leaderboard=leaderboard(cells, bootstrap),
        by_prompt=facet_table(cells, "prompt", bootstrap),
        by_config=(
            facet_table(cells, "model_config", bootstrap) if len(facets.model_configs) > 1 else None
        ),
        by_dataset=facet_table(cells, "dataset", bootstrap),
        agreement=grader_agreement(cells),
        costs=cost_lines,
        errors=errors(cells),
        difficulty=item_difficulty(cells, item_text),
        graded=cells.valid_grades().num_rows,
        solutions=cells.solutions.num_rows,
        usd=_total_usd(cells),
        prompt_cache_saved_usd=sum(c.prompt_cache_saved_usd for c in cost_lines),
        batch_rows=sum(c.batch_rows for c in cost_lines),
        batch_saved_usd=sum(c.batch_saved_usd for c in cost_lines),
        last_run=last_run,
        irt=_irt_section(plan, cells),
    )


def _irt_section(plan: Plan, cells: StudyCells) -> IrtSection:
    from itemeval.irt.report import irt_section  # irt/ reads the report's cells

    return irt_section(plan, cells)


def _total_usd(cells: StudyCells) -> float:
    total = 0.0
    for table in (cells.solutions, cells.grades):
        if table.num_rows:
            total += float(pc.sum(table.column("usd")).as_py() or 0.0)
    return total


# -- the terminal leaderboard -----------------------------------------------------------------


def text_table(rows: Sequence[Sequence[str]], header: Sequence[str], right: set[int]) -> str:
    """Plain aligned columns (numbers right-aligned)."""
    widths = [max(len(str(c)) for c in column) for column in zip(header, *rows, strict=True)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            str(c).rjust(w) if i in right else str(c).ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return "\n".join([line(header), *(line(r) for r in rows)])


def leaderboard_lines(board: Leaderboard) -> tuple[list[str], list[list[str]], set[int]]:
    """Header, rows and right-aligned columns of the condition leaderboard."""
    graders = list(board.graders)
    if board.primary is not None:
        graders.sort(key=lambda g: g.id != board.primary.id)  # type: ignore[union-attr]
    header = ["#", "condition", "model", "prompt", "config", *(g.label for g in graders), "graded"]
    rows = []
    for rank, line in enumerate(board.conditions, start=1):
        f = line.generate
        assert f is not None
        headline = board.headline(line)
        rows.append(
            [
                str(rank),
                f.slug,
                f.model_name,
                f.prompt,
                f.model_config,
                *(fmt_proportion(line.accuracy.get(g.id)) for g in graders),
                f"{int(headline.trials):,}" if headline and headline.defined else "0",
            ]
        )
    right = {0, *range(5, 5 + len(graders) + 1)}
    return header, rows, right


def format_leaderboard(study: str, board: Leaderboard, bootstrap: Bootstrap) -> str:
    """A leaderboard as aligned plain text with a two-line heading."""
    if board.primary is None:
        return "No grader in this study: nothing to rank."
    header, rows, right = leaderboard_lines(board)
    intro = (
        f"Leaderboard of {study}: accuracy by {board.primary.label}"
        + (" (ranked), and by the other graders" if len(board.graders) > 1 else "")
        + f"\n95% intervals: bootstrap over items, epochs kept together "
        f"({bootstrap.resamples} resamples, seed {bootstrap.seed})"
    )
    return intro + "\n\n" + text_table(rows, header, right)


def leaderboard_text(plan: Plan, bootstrap: Bootstrap | None = None) -> str:
    """The leaderboard of `plan`'s store as aligned plain text, with 95% intervals."""
    bootstrap = bootstrap or Bootstrap()
    return format_leaderboard(plan.study.study, leaderboard(read_cells(plan), bootstrap), bootstrap)

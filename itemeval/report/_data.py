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
from itemeval._util.heap import release_unused_memory, use_system_arrow_pool
from itemeval.importing import imported_notes
from itemeval.judging import (
    JudgeAnalysis,
    PairwiseAnalysis,
    judge_analysis,
    study_cells,
    study_pairwise,
)
from itemeval.planning import Plan
from itemeval.report._costs import Cost
from itemeval.report._difficulty import DatasetDifficulty, item_difficulty
from itemeval.report._numbers import headline_family, study_numbers
from itemeval.report._summary import (
    Bootstrap,
    Errors,
    FacetTable,
    GraderAgreement,
    Leaderboard,
    errors,
    facet_table,
    fmt_proportion,
    grader_agreement,
)
from itemeval.results import DesignFacets, ItemFetcher, StudyCells
from itemeval.store import latest_manifest

if TYPE_CHECKING:  # imported where used: a run, which imports this module, never compares
    from itemeval.irt import IrtSection
    from itemeval.statistics import Family, StudyStatistics


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
    usd: float  # paid: generation + grading, logical rows
    cache_hits: int = 0  # rows answered from the response cache (they paid nothing)
    cache_saved_usd: float = 0.0  # what those calls would have cost at their prices
    prompt_cache_saved_usd: float = 0.0  # what providers' prompt caches saved on them
    batch_rows: int = 0  # rows answered through providers' batch APIs
    batch_saved_usd: float = 0.0  # what the batch prices saved on them
    last_run: dict[str, str] = field(default_factory=dict)
    version: str = __version__
    statistics: StudyStatistics | None = None  # paired comparisons, ranks, tiers, components
    judges: JudgeAnalysis | None = None  # judges and panels against gold (report/judges.py)
    pairwise: list[PairwiseAnalysis] = field(default_factory=list)  # report/pairwise.py
    imported: list[str] = field(default_factory=list)  # imported conditions and their matches
    irt: IrtSection | None = None  # items item response theory finds suspicious (irt/report)
    adaptive: list[list[str]] = field(default_factory=list)  # predictions (irt.adaptive_rows)

    @property
    def headline_family(self) -> Family | None:
        """The headline grader's accuracy over conditions: the leaderboard's tiers and ranks."""
        return headline_family(self.statistics, self.leaderboard)


def report_data(plan: Plan, bootstrap: Bootstrap | None = None) -> ReportData:
    # Every big buffer its own mapping, returned when freed: the sections build and drop
    # row-sized arrays one after another, and pooled pages made the peak vary by 300 MB.
    use_system_arrow_pool()
    cells = study_cells(plan)
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

    numbers = study_numbers(plan, cells, bootstrap, families="all")
    bootstrap, cost_lines = numbers.bootstrap, numbers.costs
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
        leaderboard=numbers.leaderboard,
        by_prompt=facet_table(cells, "prompt", bootstrap),
        by_config=(
            facet_table(cells, "model_config", bootstrap) if len(facets.model_configs) > 1 else None
        ),
        by_dataset=facet_table(cells, "dataset", bootstrap),
        agreement=grader_agreement(cells),
        costs=cost_lines,
        errors=errors(cells),
        difficulty=item_difficulty(cells, item_text),
        imported=imported_notes(plan.design),
        graded=cells.valid_grades().num_rows,
        solutions=cells.answers,
        usd=_total_usd(cells),
        cache_hits=sum(c.cache_hits for c in cost_lines),
        cache_saved_usd=sum(c.cache_saved_usd for c in cost_lines),
        prompt_cache_saved_usd=sum(c.prompt_cache_saved_usd for c in cost_lines),
        batch_rows=sum(c.batch_rows for c in cost_lines),
        batch_saved_usd=sum(c.batch_saved_usd for c in cost_lines),
        last_run=last_run,
        statistics=numbers.statistics,
        judges=judge_analysis(
            cells,
            plan,
            resamples=bootstrap.resamples,
            seed=bootstrap.seed,
            clusters=bootstrap.clusters,
        ),
        irt=_irt_section(plan, cells),
        adaptive=_adaptive_rows(plan),
        pairwise=study_pairwise(plan),
    )


def _adaptive_rows(plan: Plan) -> list[list[str]]:
    from itemeval.irt import adaptive_rows

    return adaptive_rows(plan)


def _irt_section(plan: Plan, cells: StudyCells) -> IrtSection:
    from itemeval.irt import irt_section  # irt/ reads the report's cells

    # The sections before it freed their intermediates; the pools would keep the pages for the
    # fit to grow on top of (230 MB at 10M rows).
    release_unused_memory()
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


def leaderboard_lines(
    board: Leaderboard, family: Family | None = None
) -> tuple[list[str], list[list[str]], set[int]]:
    """Header, rows and right-aligned columns of the condition leaderboard. With the headline
    `family`, each row starts with its tier and its 95% rank interval instead of a bare rank."""
    from itemeval.statistics import rank_text

    graders = list(board.graders)
    if board.primary is not None:
        graders.sort(key=lambda g: g.id != board.primary.id)  # type: ignore[union-attr]
    first = ["tier", "rank"] if family is not None else ["#"]
    header = [*first, "condition", "model", "prompt", "config"]
    header += [*(g.label for g in graders), "graded"]
    position = {name: u for u, name in enumerate(family.units)} if family is not None else {}
    lines = list(board.conditions)
    if family is not None:  # by tier, then accuracy (a tier holds what cannot be told apart)
        lines.sort(key=lambda line: family.tiers[position[line.name]])
    rows = []
    for rank, line in enumerate(lines, start=1):
        f = line.generate
        assert f is not None
        headline = board.headline(line)
        u = position.get(line.name)
        if family is None:
            lead = [str(rank)]
        elif u is None:
            lead = ["", ""]
        else:
            lead = [str(family.tiers[u]), rank_text(family, u)]
        rows.append(
            [
                *lead,
                f.slug,
                f.model_name,
                f.prompt,
                f.model_config,
                *(fmt_proportion(line.accuracy.get(g.id)) for g in graders),
                f"{int(headline.trials):,}" if headline and headline.defined else "0",
            ]
        )
    leading = len(first)
    right = {*range(leading), *range(leading + 4, leading + 4 + len(graders) + 1)}
    return header, rows, right


def format_leaderboard(
    study: str, board: Leaderboard, bootstrap: Bootstrap, family: Family | None = None
) -> str:
    """A leaderboard as aligned plain text with a heading; with the headline `family`, tiers,
    rank intervals and a line saying which differences are real."""
    if board.primary is None:
        return "No grader in this study: nothing to rank."
    header, rows, right = leaderboard_lines(board, family)
    intro = (
        f"Leaderboard of {study}: accuracy by {board.primary.label}"
        + (" (ranked), and by the other graders" if len(board.graders) > 1 else "")
        + f"\n95% intervals: bootstrap over {_unit(bootstrap)}, epochs kept together "
        f"({bootstrap.resamples} resamples, seed {bootstrap.seed})"
    )
    if family is not None:
        intro += (
            "; rank: 95% interval of the rank over the same resamples; tier: conditions that "
            "cannot be told apart from the best of the tier"
        )
    text = intro + "\n\n" + text_table(rows, header, right)
    if family is not None:
        from itemeval.statistics import verdict

        text += "\n\n" + verdict(family)
    return text


def _unit(bootstrap: Bootstrap) -> str:
    return "items" if bootstrap.clusters is None else "clusters of items (analysis.cluster_by)"


def leaderboard_text(plan: Plan, bootstrap: Bootstrap | None = None) -> str:
    """The leaderboard of `plan`'s store as aligned plain text, with 95% intervals, tiers and
    rank intervals of the headline grader's paired comparisons."""
    numbers = study_numbers(plan, study_cells(plan), bootstrap)
    return format_leaderboard(
        plan.study.study, numbers.leaderboard, numbers.bootstrap, numbers.family
    )

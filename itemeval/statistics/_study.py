"""A plan's statistics: its cells read once, `analysis:` applied (clusters, adjustment, level).

`plan_statistics(plan)` is what the report, `export`, `status` and the Python API call (through
`report.study_numbers` for the leaderboard, its tiers and costs); its cells hold the study's
panels as grade conditions (`judging.study_cells`), as the report's do. `analysis_options` is
the one place the options are read; `analysis.cluster_by`'s clusters are read from the items by
`results.study_clusters`.
"""

from __future__ import annotations

from dataclasses import replace

from itemeval.planning import Plan
from itemeval.results import DesignFacets, StudyCells, primary_grader, read_cells, study_clusters
from itemeval.statistics._families import Options, StudyStatistics, study_statistics


def analysis_options(
    plan: Plan,
    resamples: int | None = None,
    seed: int | None = None,
    confidence: float | None = None,
) -> Options:
    """The study's `analysis:` (adjustment, level) with the bootstrap's resamples, seed and
    confidence (the defaults unless given)."""
    analysis = plan.study.analysis
    options = Options(adjustment=analysis.adjust, alpha=analysis.alpha)
    if resamples is not None:
        options = replace(options, resamples=resamples)
    if seed is not None:
        options = replace(options, seed=seed)
    if confidence is not None:
        options = replace(options, confidence=confidence)
    return options


def plan_statistics(
    plan: Plan,
    options: Options | None = None,
    *,
    cells: StudyCells | None = None,
    headline_only: bool = False,
) -> StudyStatistics:
    """The study's families and variance components (`families.study_statistics`), from the
    plan's cells with its panels (read here unless given)."""
    options = options or analysis_options(plan)
    if cells is None and headline_only:  # the headline grader's grades are all it reads
        primary = primary_grader(DesignFacets.of(plan.design).grade)
        only = [primary.id] if primary is not None else []
        cells = read_cells(plan, graders=only, count_solutions=False)
    if cells is None:
        from itemeval.judging import study_cells  # the report's cells: panels as graders

        cells = study_cells(plan)
    clusters = study_clusters(plan, cells)
    return study_statistics(cells, options, clusters=clusters, headline_only=headline_only)

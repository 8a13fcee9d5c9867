"""The numbers every reader shows, computed in one place: `study_numbers(plan, cells)`.

The report, `leaderboard_text` (the demo, `Study.leaderboard()`), `itemeval status` and the
viewer's overview all call it, so one study reads the same everywhere, digit for digit:

* the options: resamples, seed and confidence of the `Bootstrap`, with `analysis.adjust` and
  `analysis.alpha` (`statistics.analysis_options`), and `analysis.cluster_by`'s clusters
  (`results.study_clusters`): every interval resamples them;
* the leaderboard: accuracy with its interval per condition and per model under every grade
  condition, panels included (`summary.leaderboard`, from per-item counts: the viewer passes
  the ones its index holds);
* the headline grader's paired comparisons: tiers and rank intervals
  (`statistics.study_statistics`, every family for the report);
* the costs per condition: paid, saved by the response cache, alone, per correct answer
  (`costs.costs`).

`judging.study_cells(plan)` are the cells they are computed from: the store's grades with the
study's panels as grade conditions.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from itemeval.planning import Plan
from itemeval.report._costs import Cost, costs
from itemeval.report._summary import Bootstrap, ItemCounts, Leaderboard, leaderboard
from itemeval.results import StudyCells, study_clusters

if TYPE_CHECKING:  # imported where used: a run, which imports this module, never compares
    from itemeval.statistics import Family, Options, StudyStatistics

#: Which paired comparisons to compute: every family (the report), the headline grader's
#: accuracy over conditions (the leaderboard's tiers), or none (a viewer over a big store).
Families = Literal["all", "headline", "none"]


@dataclass(frozen=True)
class StudyNumbers:
    bootstrap: Bootstrap  # with `analysis.cluster_by`'s clusters
    options: Options  # the paired comparisons': the same resamples, seed and confidence
    leaderboard: Leaderboard
    costs: list[Cost]
    statistics: StudyStatistics | None = None

    @property
    def family(self) -> Family | None:
        """The headline grader's accuracy over conditions: the leaderboard's tiers and ranks."""
        return headline_family(self.statistics, self.leaderboard)

    def differences(self) -> str | None:
        """What the headline grader's paired comparisons say, in one line (`status` prints
        it; None with fewer than two conditions graded)."""
        from itemeval.statistics import verdict

        family, board = self.family, self.leaderboard
        if family is None or board.primary is None:
            return None
        return f"{verdict(family)} ({board.primary.label})"

    def tiers(self) -> dict[str, str]:
        """Each generate condition's tier and rank interval: {condition id: "1 (rank 1-2)"}."""
        from itemeval.statistics import rank_text

        board = self.leaderboard
        if self.statistics is None or board.primary is None:
            return {}
        found = self.statistics.find(board.primary.id)
        if found is None:
            return {}
        key, family = found
        ids = key.unit_ids or tuple(family.units)
        return {
            ids[u]: f"{family.tiers[u]} (rank {rank_text(family, u)})"
            for u in range(len(family.units))
            if family.answers[u] > 0
        }


def study_numbers(
    plan: Plan,
    cells: StudyCells,
    bootstrap: Bootstrap | None = None,
    *,
    counts: ItemCounts | None = None,
    families: Families = "headline",
) -> StudyNumbers:
    """The leaderboard, its paired comparisons and the costs of `cells` (see the module doc)."""
    from itemeval.statistics import analysis_options, study_statistics

    bootstrap = bootstrap or Bootstrap()
    options = analysis_options(plan, bootstrap.resamples, bootstrap.seed, bootstrap.confidence)
    clusters = study_clusters(plan, cells)
    if clusters is not None:  # analysis.cluster_by: every interval over clusters
        bootstrap = replace(bootstrap, clusters=clusters.codes)
    statistics = (
        study_statistics(cells, options, clusters=clusters, headline_only=families == "headline")
        if families != "none"
        else None
    )
    return StudyNumbers(
        bootstrap=bootstrap,
        options=options,
        leaderboard=leaderboard(cells, bootstrap, counts),
        costs=costs(cells, plan.pricing),
        statistics=statistics,
    )


def headline_family(statistics: StudyStatistics | None, board: Leaderboard) -> Family | None:
    if statistics is None or board.primary is None:
        return None
    found = statistics.find(board.primary.id)
    return found[1] if found is not None else None

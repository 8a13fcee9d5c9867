"""Item difficulty as the study observed it: per item, the share of correct answers over every
model, prompt, config and epoch (headline grader), per dataset.

Items that no condition ever answered correctly are listed on their own: when strong models all
fail an item, the item (its target, its wording) is often what is wrong.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from itemeval.report._summary import headline_code
from itemeval.results import StudyCells

#: item ids -> {item_id: (input, target, stated difficulty)}
ItemText = Callable[[list[str]], dict[str, tuple[str, str, float | None]]]


@dataclass(frozen=True)
class ItemScore:
    item_id: str
    dataset: str
    correct: int
    graded: int
    input: str | None = None
    target: str | None = None
    stated_difficulty: float | None = None

    @property
    def accuracy(self) -> float:
        return self.correct / self.graded if self.graded else float("nan")


#: Unsolved items a dataset lists by name (the rest are counted).
LISTED_UNSOLVED = 50


@dataclass(frozen=True)
class DatasetDifficulty:
    dataset: str
    items: int  # selected items
    graded_items: int  # items with at least one valid grade
    mean_accuracy: float  # mean of the per-item accuracies
    solved_by_all: int  # items every graded answer got right
    unsolved: list[ItemScore]  # items no graded answer got right (the first `LISTED_UNSOLVED`)
    hardest: list[ItemScore]  # the lowest accuracies (unsolved ones first)
    accuracies: np.ndarray  # per-item accuracy of the graded items
    unsolved_items: int = 0  # every item no graded answer got right

    @property
    def unlisted_unsolved(self) -> int:
        return max(0, self.unsolved_items - len(self.unsolved))


def item_difficulty(
    cells: StudyCells, item_text: ItemText | None = None, *, hardest: int = 5
) -> list[DatasetDifficulty]:
    """Per dataset (study order): item accuracies, the hardest items and the unsolved ones.
    Arrays over the items; an `ItemScore` only for the items listed."""
    code = headline_code(cells)
    grades = cells.valid_grades(code) if code is not None else cells.grades.slice(0, 0)
    n_items = cells.items.num_rows
    item = grades.column("item").to_numpy()
    correct = np.bincount(
        item, weights=pc.cast(grades.column("correct"), pa.int64()).to_numpy(), minlength=n_items
    ).astype(np.int64)
    graded = np.bincount(item, minlength=n_items).astype(np.int64)
    dataset_of = pc.index_in(cells.items.column("dataset"), value_set=pa.array(cells.datasets))
    dataset_codes = dataset_of.to_numpy(zero_copy_only=False)
    ids = cells.items.column("item_id")
    out = []
    wanted: list[str] = []
    for code_d, dataset in enumerate(cells.datasets):
        mine = np.flatnonzero((dataset_codes == code_d) & (graded > 0))
        accuracy = correct[mine] / graded[mine]
        # Lowest accuracy first, then more graded answers, then the item id.
        names = ids.take(pa.array(mine)).to_numpy(zero_copy_only=False)
        order = np.lexsort((names, -graded[mine], accuracy)) if len(mine) else mine
        ranked = mine[order]

        def score(i: int, name: str = dataset) -> ItemScore:
            return ItemScore(ids[int(i)].as_py(), name, int(correct[i]), int(graded[i]))

        unsolved_at = ranked[correct[ranked] == 0]
        unsolved = [score(i) for i in unsolved_at[:LISTED_UNSOLVED]]
        chosen = [score(i) for i in ranked[:hardest]]
        wanted += [s.item_id for s in unsolved] + [s.item_id for s in chosen]
        out.append(
            DatasetDifficulty(
                dataset=dataset,
                items=int((dataset_codes == code_d).sum()),
                graded_items=len(mine),
                mean_accuracy=float(accuracy.mean()) if len(mine) else float("nan"),
                solved_by_all=int((correct[mine] == graded[mine]).sum()),
                unsolved=unsolved,
                hardest=chosen,
                accuracies=accuracy[order],
                unsolved_items=len(unsolved_at),
            )
        )
    if item_text is None or not wanted:
        return out
    texts = item_text(list(dict.fromkeys(wanted)))
    return [
        DatasetDifficulty(
            dataset=d.dataset,
            items=d.items,
            graded_items=d.graded_items,
            mean_accuracy=d.mean_accuracy,
            solved_by_all=d.solved_by_all,
            unsolved=[_with_text(s, texts) for s in d.unsolved],
            hardest=[_with_text(s, texts) for s in d.hardest],
            accuracies=d.accuracies,
            unsolved_items=d.unsolved_items,
        )
        for d in out
    ]


def _with_text(score: ItemScore, texts: dict[str, tuple[str, str, float | None]]) -> ItemScore:
    if score.item_id not in texts:
        return score
    text, target, difficulty = texts[score.item_id]
    return ItemScore(
        score.item_id, score.dataset, score.correct, score.graded, text, target, difficulty
    )

"""Item difficulty as the study observed it: per item, the share of correct answers over every
model, prompt, config and epoch (headline grader), per dataset.

Items that no condition ever answered correctly are listed on their own: when strong models all
fail an item, the item (its target, its wording) is often what is wrong.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from itemeval.export._report.summary import headline_code
from itemeval.export._table.cells import StudyCells

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


@dataclass(frozen=True)
class DatasetDifficulty:
    dataset: str
    items: int  # selected items
    graded_items: int  # items with at least one valid grade
    mean_accuracy: float  # mean of the per-item accuracies
    solved_by_all: int  # items every graded answer got right
    unsolved: list[ItemScore]  # items no graded answer got right
    hardest: list[ItemScore]  # the lowest accuracies (unsolved ones first)
    accuracies: np.ndarray  # per-item accuracy of the graded items


def item_difficulty(
    cells: StudyCells, item_text: ItemText | None = None, *, hardest: int = 5
) -> list[DatasetDifficulty]:
    """Per dataset (study order): item accuracies, the hardest items and the unsolved ones."""
    code = headline_code(cells)
    grades = cells.valid_grades(code) if code is not None else cells.grades.slice(0, 0)
    table = grades.select(["dataset", "item"]).append_column(
        "c", pc.cast(grades.column("correct"), pa.int64())
    )
    per_item = table.group_by(["dataset", "item"], use_threads=False).aggregate(
        [("c", "sum"), ("c", "count")]
    )
    ids = cells.item_ids(per_item.column("item").to_pylist())
    selected = Counter(cells.items.column("dataset").to_pylist())
    scores: dict[str, list[ItemScore]] = {d: [] for d in cells.datasets}
    for dataset, item, correct, graded in zip(
        per_item.column("dataset").to_pylist(),
        ids,
        per_item.column("c_sum").to_pylist(),
        per_item.column("c_count").to_pylist(),
        strict=True,
    ):
        name = cells.datasets[dataset]
        scores[name].append(ItemScore(item, name, int(correct), int(graded)))
    out = []
    wanted: list[str] = []
    for dataset in cells.datasets:
        items = sorted(scores[dataset], key=lambda s: (s.accuracy, -s.graded, s.item_id))
        unsolved = [s for s in items if s.correct == 0]
        chosen = items[:hardest]
        wanted += [s.item_id for s in unsolved[:50]] + [s.item_id for s in chosen]
        accuracies = np.array([s.accuracy for s in items], dtype=np.float64)
        out.append(
            DatasetDifficulty(
                dataset=dataset,
                items=selected.get(dataset, 0),
                graded_items=len(items),
                mean_accuracy=float(accuracies.mean()) if len(items) else float("nan"),
                solved_by_all=sum(1 for s in items if s.correct == s.graded),
                unsolved=unsolved,
                hardest=chosen,
                accuracies=accuracies,
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

"""Identical judge requests among a stage's pending grade cells.

A judge's request is its rubric rendered with the item and the judged solution's text, sent with
the judge's model and params: two grade cells of one grade condition with the same item, epoch
and solution text ask the same request (the same response-cache key), whichever generate
condition wrote the text. Short answers repeat often (a letter, a number, a capital's name), so
a study of several models or prompts has many such cells. `IdenticalCells` finds them, one
generate condition at a time, from the 64-bit keys of the solutions' `text_hash`: the grade
shards send the first of each once and the repeats after it (`runtime/_shards.py`), and the
estimate counts them as no call (`repeated_judge_cells`, `planning/_estimate.py`). A key
collision (about 2^-64 a pair) makes a cell wait behind another it does not repeat, never lose
its own call.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np
import pyarrow as pa

from itemeval.store._content_keys import hash_keys
from itemeval.store._layout import StudyStore
from itemeval.store._pending import CellMasks, current_solution_keys
from itemeval.store._positions import ItemLookup


class IdenticalCells:
    """Which pending judge cells ask a request an earlier cell of the stage asks too: the same
    grade condition, item and epoch, and a solution with the same text (so the same rendered
    rubric) from an earlier generate condition. Fed one generate condition at a time (`split`),
    it keeps a 64-bit key of each cell's solution text per condition seen (8 bytes a cell) and a
    mask of the repeats."""

    def __init__(self, pending: CellMasks, judges: list[str]):
        self.pending = pending
        self.judges = judges
        self.keys: dict[str, np.ndarray] = {}  # generate condition -> text key per cell
        self.masks: dict[tuple[str, str], np.ndarray] = {}  # (grade, generate) -> repeats

    def split(self, gen: str, positions: np.ndarray, hashes: pa.Array) -> None:
        """Mark the cells of `gen` (solutions at `positions`, with `hashes`) that repeat a cell
        of a generate condition split before."""
        if self.wants(gen):
            keys = np.zeros(len(self.pending.item_ids) * self.pending.epochs, dtype=np.uint64)
            keys[positions] = hash_keys(hashes)
            self.split_keys(gen, keys)

    def wants(self, gen: str) -> bool:
        """Whether some judge has pending cells of `gen`."""
        return any(self.pending.count((gid, gen)) for gid in self.judges)

    def split_keys(self, gen: str, keys: np.ndarray) -> None:
        """`split` with the text key of every cell's solution (`hash_keys`, by cell position)."""
        judges = [gid for gid in self.judges if self.pending.count((gid, gen))]
        for gid in judges:
            mine = self.pending.masks[(gid, gen)].reshape(-1)
            same = np.zeros(len(mine), dtype=bool)
            for earlier, earlier_keys in self.keys.items():
                theirs = self.pending.masks.get((gid, earlier))
                if theirs is not None:
                    same |= theirs.reshape(-1) & (earlier_keys == keys)
            same &= mine
            if same.any():
                self.masks[(gid, gen)] = same
        self.keys[gen] = keys

    def first(self, gid: str, gen: str, positions: np.ndarray) -> np.ndarray | None:
        """Which of `positions` are not repeats (None: all of them)."""
        same = self.masks.get((gid, gen))
        return None if same is None else ~same[positions]

    def repeats(self) -> CellMasks:
        """The repeats, as pending cells of their own."""
        shape = (len(self.pending.item_ids), self.pending.epochs)
        masks: dict[Hashable, np.ndarray] = {
            key: same.reshape(shape) for key, same in self.masks.items()
        }
        return CellMasks(self.pending.item_ids, self.pending.epochs, masks)


def repeated_judge_cells(
    store: StudyStore,
    pending: CellMasks,
    gen_condition_ids: Sequence[str],
    judge_ids: Sequence[str],
) -> CellMasks:
    """The pending judge cells (keyed `(grade, generate)`) whose request an earlier pending
    cell asks too, from the solutions stored now: the cells of each generate condition with
    pending judge cells (their text keys), 8 bytes a cell per such condition."""
    identical = IdenticalCells(pending, list(judge_ids))
    wanted = [gen for gen in dict.fromkeys(gen_condition_ids) if identical.wants(gen)]
    if len(wanted) < 2 or not pending.num_rows:
        return identical.repeats()
    lookup = ItemLookup(pending.item_ids)
    for gen in wanted:
        solutions = current_solution_keys(store, gen, lookup, pending.epochs)
        if len(solutions.keys):
            identical.split_keys(gen, solutions.keys)
    identical.keys.clear()
    return identical.repeats()

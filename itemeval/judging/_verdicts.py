"""Verdicts side by side: the grades of several graders (and gold) on the same answers.

An answer is a cell `(gen, item, epoch)` (a generate condition's answer to an item in one
epoch), written as one integer `key = (gen * items + item) * epochs + epoch`. `Verdicts` holds,
for a set of graders, one row per cell any of them graded validly and one column per grader:
`passed` (the verdict, NaN where that grader has none) and `score`.

Everything here is numpy over the small columns the report already reads (`grade, gen, item,
dataset, epoch, correct, score, valid`); nothing reads the store.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


@dataclass(frozen=True)
class Shape:
    """How cells are numbered: the counts of generate conditions, items and epochs."""

    gens: int
    items: int
    epochs: int

    def keys(self, gen: np.ndarray, item: np.ndarray, epoch: np.ndarray | int) -> np.ndarray:
        return (gen.astype(np.int64) * self.items + item) * self.epochs + epoch

    def split(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`(gen, item, epoch)` of each key."""
        epoch = keys % self.epochs
        rest = keys // self.epochs
        return rest // self.items, rest % self.items, epoch


@dataclass(frozen=True)
class Verdicts:
    """Graders' verdicts on the same cells (see the module docstring)."""

    keys: np.ndarray  # int64, sorted, one per cell
    dataset: np.ndarray  # int32 per cell
    passed: np.ndarray  # float (1.0 pass, 0.0 fail, NaN none), cells x graders
    score: np.ndarray  # float, cells x graders
    shape: Shape

    @property
    def gen(self) -> np.ndarray:
        return self.shape.split(self.keys)[0]

    @property
    def item(self) -> np.ndarray:
        return self.shape.split(self.keys)[1]

    @property
    def epoch(self) -> np.ndarray:
        return self.shape.split(self.keys)[2]


def column(table: pa.Table, name: str, dtype: type | str = np.float64) -> np.ndarray:
    values = table.column(name)
    if pa.types.is_boolean(values.type):
        values = pc.cast(values, pa.int8())
    return np.asarray(values.to_numpy(zero_copy_only=False), dtype=dtype)


def verdicts(grades: pa.Table, codes: Sequence[int], shape: Shape) -> Verdicts:
    """The valid grades of the grade conditions `codes` (in that column order), cell by cell."""
    mask = pc.and_(grades.column("valid"), pc.is_in(grades.column("grade"), pa.array(codes)))
    rows = grades.filter(mask)
    grade = column(rows, "grade", np.int64)
    keys = shape.keys(column(rows, "gen", np.int64), column(rows, "item", np.int64), 0)
    keys = keys + column(rows, "epoch", np.int64)
    unique, inverse = np.unique(keys, return_inverse=True)
    lookup = np.full(max(codes, default=0) + 1, -1, dtype=np.int64)
    lookup[np.asarray(codes, dtype=np.int64)] = np.arange(len(codes))
    col = lookup[grade]
    passed = np.full((unique.size, len(codes)), np.nan)
    score = np.full((unique.size, len(codes)), np.nan)
    passed[inverse, col] = column(rows, "correct")
    score[inverse, col] = np.nan_to_num(column(rows, "score"), nan=np.nan)
    dataset = np.zeros(unique.size, dtype=np.int32)
    dataset[inverse] = column(rows, "dataset", np.int32)
    return Verdicts(unique, dataset, passed, score, shape)


def merge_gold(
    parts: Sequence[tuple[np.ndarray, np.ndarray]],
) -> tuple[np.ndarray, np.ndarray]:
    """Gold verdicts from several sources as (sorted keys, verdicts); a later source wins where
    two give a verdict on the same answer."""
    if not parts:
        return np.empty(0, dtype=np.int64), np.empty(0)
    keys = np.concatenate([k for k, _ in parts]).astype(np.int64)
    values = np.concatenate([v for _, v in parts]).astype(float)
    # The last occurrence of each key: unique over the reversed arrays.
    unique, first = np.unique(keys[::-1], return_index=True)
    return unique, values[::-1][first]


def aligned(keys: np.ndarray, gold_keys: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """Gold verdicts (1.0, 0.0) at `keys`, NaN where there is none (`gold_keys` sorted)."""
    out = np.full(keys.size, np.nan)
    if gold_keys.size == 0:
        return out
    at = np.searchsorted(gold_keys, keys)
    at = np.clip(at, 0, gold_keys.size - 1)
    hit = gold_keys[at] == keys
    out[hit] = gold[at[hit]]
    return out

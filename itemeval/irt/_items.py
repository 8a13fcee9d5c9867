"""Every fitted item's parameters and flag as columns: a row per item, built with numpy and
arrow (no Python object per item), read as `ItemParameters` only for the items shown.

Columns (`items.parquet`): dataset, item_id, item_hash, correct, trials, difficulty (+ se; the
2PL's `-d / a` where its discrimination is clearly above 0, else NaN), discrimination (+ se),
difficulty_1pl, flag, intercept (+ se), difficulty_1pl_se, discrimination_z, discrimination_q.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, overload

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from itemeval.irt._flags import FLAG_Q

if TYPE_CHECKING:
    from itemeval.irt._fit import IrtFit
    from itemeval.irt._responses import TextOf

NEGATIVE = "negative discrimination"
#: The flags, in the order an item is tested for them and in which they are listed.
FLAGS = ("none right", "all right", NEGATIVE)


@dataclass(frozen=True)
class ItemParameters:
    dataset: str
    item_id: str
    item_hash: str
    correct: int
    trials: int
    difficulty: float  # 2PL b = -d / a where a is clearly above 0, else NaN (`b_defined`)
    difficulty_se: float
    discrimination: float  # 2PL a
    discrimination_se: float
    difficulty_1pl: float
    flag: str | None  # "none right" | "all right" | "negative discrimination"
    intercept: float = float("nan")  # 2PL d: P(right) = sigmoid(a theta + d)
    intercept_se: float = float("nan")
    difficulty_1pl_se: float = float("nan")
    discrimination_z: float = float("nan")  # score test of a = 0 (below -1.96: a < 0 at 2.5%)
    discrimination_q: float = float("nan")  # its one-sided p, Benjamini-Hochberg adjusted
    input: str | None = None
    target: str | None = None

    @property
    def accuracy(self) -> float:
        return self.correct / self.trials if self.trials else float("nan")


def item_table(
    keys: pa.Table,
    two: IrtFit,
    one: IrtFit,
    correct: np.ndarray,
    trials: np.ndarray,
    z: np.ndarray,
    q: np.ndarray,
) -> pa.Table:
    """The items' columns (see the module doc) from the two fits, the counts (conditions x
    items) and the discrimination test (`discrimination_q`); `keys` names each item."""
    k = correct.sum(0).astype(np.int64)
    n = trials.sum(0).astype(np.int64)
    # The flags as `item_flag` gives them, in its order: never answered (no flag), none right,
    # all right, negative discrimination.
    flag = np.full(len(k), -1, dtype=np.int8)
    with np.errstate(invalid="ignore"):
        negative = (n > 0) & (q <= FLAG_Q)
    flag[negative] = 2
    flag[(n > 0) & (k == n)] = 1
    flag[(n > 0) & (k == 0)] = 0
    flags = pa.DictionaryArray.from_arrays(
        pa.array(flag, mask=flag < 0), pa.array(FLAGS, pa.string())
    ).cast(pa.string())
    defined = two.b_defined
    nan = np.float64("nan")
    return pa.table(
        {
            "dataset": keys.column("dataset"),
            "item_id": keys.column("item_id"),
            "item_hash": keys.column("item_hash"),
            "correct": k,
            "trials": n,
            "difficulty": np.where(defined, two.b, nan),
            "difficulty_se": np.where(defined, two.b_se, nan),
            "discrimination": two.a,
            "discrimination_se": two.a_se,
            "difficulty_1pl": one.b,
            "flag": flags,
            "intercept": two.d,
            "intercept_se": two.d_se,
            "difficulty_1pl_se": one.b_se,
            "discrimination_z": np.asarray(z, dtype=np.float64),
            "discrimination_q": np.asarray(q, dtype=np.float64),
        }
    )


class ItemTable(Sequence[ItemParameters]):
    """The fitted items (`table`, a row per item), read as `ItemParameters` one at a time;
    `flag_counts` and `suspicious` answer from the columns."""

    def __init__(self, table: pa.Table, text_of: TextOf | None = None) -> None:
        self.table = table
        self._text_of = text_of

    def __len__(self) -> int:
        return self.table.num_rows

    @overload
    def __getitem__(self, index: int) -> ItemParameters: ...

    @overload
    def __getitem__(self, index: slice) -> list[ItemParameters]: ...

    def __getitem__(self, index: int | slice) -> ItemParameters | list[ItemParameters]:
        if isinstance(index, slice):
            return self.rows(np.arange(len(self))[index])
        if not -len(self) <= index < len(self):
            raise IndexError(index)
        return self.rows(np.array([index % len(self)]))[0]

    def __iter__(self) -> Iterator[ItemParameters]:
        step = 65_536
        for start in range(0, len(self), step):
            yield from self.rows(np.arange(start, min(start + step, len(self))), text=False)

    def rows(self, positions: np.ndarray, *, text: bool = True) -> list[ItemParameters]:
        """The items at `positions`; the flagged ones with their text (input, target)."""
        chosen = self.table.take(pa.array(np.asarray(positions, dtype=np.int64)))
        records = chosen.to_pylist()
        texts: dict[str, tuple[str, str]] = {}
        if text and self._text_of is not None:
            texts = self._text_of([r["item_id"] for r in records if r["flag"]])
        out = []
        for r in records:
            words = texts.get(r["item_id"]) if r["flag"] else None
            out.append(
                ItemParameters(
                    **r, input=words[0] if words else None, target=words[1] if words else None
                )
            )
        return out

    def flag_counts(self) -> dict[str, int]:
        """Items per flag (flags with none left out), in `FLAGS` order."""
        counts = pc.value_counts(self.table.column("flag").combine_chunks()).to_pylist()
        found = {c["values"]: c["counts"] for c in counts if c["values"] is not None}
        return {f: found[f] for f in FLAGS if f in found}

    def suspicious(
        self, limit: int | None = None, flags: Sequence[str] = FLAGS
    ) -> list[ItemParameters]:
        """The items flagged with one of `flags`: negative discrimination first, by its q (then
        its discrimination), then the others in the items' order; the first `limit`, with their
        text."""
        flag = self.table.column("flag")
        left = len(self) if limit is None else limit
        picked: list[np.ndarray] = []
        if NEGATIVE in flags:
            where = np.flatnonzero(pc.fill_null(pc.equal(flag, NEGATIVE), False).to_numpy())
            q = self.table.column("discrimination_q").to_numpy()[where]
            a = self.table.column("discrimination").to_numpy()[where]
            picked.append(where[np.lexsort((a, q))][:left])
            left -= len(picked[-1])
        rest = [f for f in flags if f != NEGATIVE]
        if rest and left > 0:
            chosen = pc.fill_null(pc.is_in(flag, value_set=pa.array(rest, pa.string())), False)
            picked.append(np.flatnonzero(chosen.to_numpy())[:left])
        return self.rows(np.concatenate(picked)) if picked else []

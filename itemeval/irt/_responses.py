"""The conditions x items matrix `analyze irt` fits, and the responses it writes.

This store's responses are the final grades of the headline grader (the report's `cells`), one
binomial per generate condition and item: right answers out of graded epochs. Other stores add
their conditions through the responses `analyze irt` stored there: an item is the same item
when its dataset, identifier and content hash (of its input and target) agree.

Everything is done on columns (numpy, arrow), never a Python loop over grades or items: the
grades come in the order `grade, gen, item, epoch` (`read_cells`), so a condition x item cell is
a run of adjacent rows, and the cells of a 10M-row store are a few arrays of 5M numbers.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from itemeval.errors import InputError, Problem
from itemeval.ids import content_hash
from itemeval.planning import Plan
from itemeval.storage import Location

if TYPE_CHECKING:
    from itemeval.results import StudyCells

ANALYSIS_DIR = "analysis/irt"
RESPONSES_FILE = "responses.parquet"
#: Items whose text is read and hashed at a time (the texts are not kept).
HASH_CHUNK = 65_536

RESPONSES_SCHEMA = pa.schema(
    [
        pa.field("store", pa.string()),
        pa.field("condition", pa.string()),
        pa.field("slug", pa.string()),
        pa.field("model", pa.string()),
        pa.field("prompt", pa.string()),
        pa.field("dataset", pa.string()),
        pa.field("item_id", pa.string()),
        pa.field("item_hash", pa.string()),
        pa.field("correct", pa.int64()),
        pa.field("trials", pa.int64()),
    ]
)
_NAMES = ("store", "condition", "slug", "model", "prompt")

#: Item id -> (input, target) of the items asked for.
TextOf = Callable[[list[str]], dict[str, tuple[str, str]]]


@dataclass(frozen=True)
class Condition:
    """A row of the matrix: a condition of this store or of another."""

    store: str
    condition: str
    slug: str
    model: str
    prompt: str


@dataclass(frozen=True)
class OwnResponses:
    """This store's responses as codes: a cell per generate condition and item answered."""

    gen: np.ndarray  # generate condition code per cell (`conditions`)
    item: np.ndarray  # item code per cell (a row of `items`)
    correct: np.ndarray  # right answers per cell
    trials: np.ndarray  # graded answers per cell
    conditions: list[Condition]  # per generate condition code
    items: pa.Table  # item_id, dataset of every selected item
    hashes: pa.Array  # each item's content hash ("" where not computed)
    grader: str  # the headline grader's label
    text_of: TextOf

    def table(self) -> pa.Table:
        """The cells as RESPONSES_SCHEMA rows, the repeated names dictionary-encoded (a few bytes
        a row; `plain_responses` for plain strings)."""
        gen = pa.array(self.gen.astype(np.int32))
        item = pa.array(self.item.astype(np.int32))
        columns = {
            name: pa.DictionaryArray.from_arrays(
                gen, pa.array([getattr(c, name) for c in self.conditions], pa.string())
            )
            for name in _NAMES
        }
        datasets = pc.dictionary_encode(self.items.column("dataset").combine_chunks())
        columns["dataset"] = pa.DictionaryArray.from_arrays(
            datasets.indices.take(item), datasets.dictionary.cast(pa.string())
        )
        columns["item_id"] = pa.DictionaryArray.from_arrays(
            item, self.items.column("item_id").combine_chunks().cast(pa.string())
        )
        columns["item_hash"] = pa.DictionaryArray.from_arrays(item, self.hashes)
        columns["correct"] = pa.array(self.correct.astype(np.int64))
        columns["trials"] = pa.array(self.trials.astype(np.int64))
        return pa.table(columns)


def plain_responses(table: pa.Table) -> pa.Table:
    return table.cast(RESPONSES_SCHEMA)


def own_responses(
    plan: Plan, cells: StudyCells | None = None, *, hashed: bool = True
) -> OwnResponses:
    """This store's responses (see the module doc). Without `hashed` the item hashes are left
    empty (nothing is written or matched) and no item's text is read until asked for."""
    from itemeval.results import ItemFetcher, primary_grader, read_cells

    cells = cells if cells is not None else read_cells(plan)
    primary = primary_grader(cells.facets.grade)
    if primary is None:
        raise InputError(Problem("the study has no grader: nothing to fit", field="facets"))
    code = cells.facets.grade.index(primary)
    grades = cells.grades
    # Only the three columns needed, of the valid grades of the headline grader (a filter of
    # the whole table would copy every column).
    wanted = pc.fill_null(grades.column("valid"), False).to_numpy()
    wanted &= grades.column("grade").to_numpy() == code
    n_items = max(cells.items.num_rows, 1)
    gen = grades.column("gen").to_numpy()[wanted]
    item = grades.column("item").to_numpy()[wanted]
    right = pc.fill_null(grades.column("correct"), False).to_numpy()[wanted].astype(np.int32)
    del wanted
    key = gen.astype(np.int64)  # a cell's key: gen, item
    key *= n_items
    key += item
    if len(key) > 1 and not bool((key[1:] >= key[:-1]).all()):
        order = np.argsort(key, kind="stable")
        key, gen, item, right = key[order], gen[order], item[order], right[order]
    first = np.ones(len(key), dtype=bool)  # the first grade of each cell
    np.not_equal(key[1:], key[:-1], out=first[1:])
    del key
    if first.all():  # one grade a cell (one epoch): nothing to add up
        correct, trials = right, np.ones(len(first), dtype=np.int32)
    else:
        starts = np.flatnonzero(first)
        correct = np.add.reduceat(right, starts)
        trials = np.diff(np.append(starts, len(first))).astype(np.int32)
        gen, item = gen[starts], item[starts]
    del first, right
    facets = cells.facets.generate
    store = plan.store.root.url
    conditions = [Condition(store, f.id, f.slug, f.model_name, f.prompt) for f in facets]
    snapshots = {d.name: d.snapshot for d in plan.datasets if d.snapshot is not None}
    fetcher = ItemFetcher(plan.items, snapshots, ["input", "target"])

    def text_of(wanted_ids: list[str]) -> dict[str, tuple[str, str]]:
        texts = fetcher.take(pa.array(wanted_ids, pa.string()))
        inputs, targets = texts.column("input").to_pylist(), texts.column("target").to_pylist()
        return dict(zip(wanted_ids, zip(inputs, targets, strict=True), strict=True))

    ids = cells.items.column("item_id").combine_chunks()
    if hashed:
        hashes = pa.concat_arrays(
            [
                pa.array(_hashes_of(fetcher.take(ids.slice(start, HASH_CHUNK))), pa.string())
                for start in range(0, len(ids), HASH_CHUNK)
            ]
            or [pa.array([], pa.string())]
        )
    else:
        hashes = pa.DictionaryArray.from_arrays(
            pa.array(np.zeros(len(ids), np.int32)), pa.array([""])
        ).cast(pa.string())
    return OwnResponses(
        gen=gen.astype(np.int32, copy=False),
        item=item.astype(np.int32, copy=False),
        correct=correct,
        trials=trials,
        conditions=conditions,
        items=cells.items,
        hashes=hashes,
        grader=primary.label,
        text_of=text_of,
    )


def _hashes_of(texts: pa.Table) -> list[str]:
    return item_hashes(texts.column("input").to_pylist(), texts.column("target").to_pylist())


def study_responses(
    plan: Plan, cells: StudyCells | None = None, *, hashed: bool = True
) -> tuple[pa.Table, str, TextOf]:
    """This store's responses (RESPONSES_SCHEMA), the headline grader's label, and a reader of
    items' text (input, target). Without `hashed` the item hashes are left empty."""
    own = own_responses(plan, cells, hashed=hashed)
    return plain_responses(own.table()), own.grader, own.text_of


def item_hashes(inputs: Sequence[str], targets: Sequence[str]) -> list[str]:
    """The content hash that identifies an item across stores (16 hex digits)."""
    return [
        content_hash({"input": i, "target": t})[:16] for i, t in zip(inputs, targets, strict=True)
    ]


def other_responses(location: Location) -> pa.Table:
    """The responses another store holds (written by `analyze irt` there)."""
    source = location.join(ANALYSIS_DIR, RESPONSES_FILE)
    if not source.exists():
        raise InputError(
            Problem(
                f"{source.url} does not exist",
                field="--with",
                hint="run `itemeval analyze irt` on that store's study first: it writes the "
                "responses other studies fit with",
            )
        )
    return pq.read_table(io.BytesIO(source.read_bytes())).cast(RESPONSES_SCHEMA)


@dataclass(frozen=True)
class ResponseMatrix:
    """What the fit reads: counts per condition (row) and item (column)."""

    correct: np.ndarray  # conditions x items
    trials: np.ndarray
    conditions: list[Condition]  # per row
    item_codes: np.ndarray  # per column: the item's code in this study (`OwnResponses.items`)
    items: pa.Table  # per column: dataset, item_id, item_hash


def response_matrix(own: OwnResponses, others: Sequence[pa.Table] = ()) -> ResponseMatrix:
    """The items this store answered (in the study's order) as columns; this store's conditions
    that answered any of them, then the other stores' conditions (in order of first row) that
    answered any of them with the same text, as rows. Another store's rows naming this store
    are left out (they are this store's own, stored by an earlier run)."""
    n_items = own.items.num_rows
    answered = np.bincount(own.item, minlength=n_items) > 0
    item_codes = np.flatnonzero(answered)
    column_of = np.cumsum(answered) - 1
    items = pa.table(
        {
            "dataset": own.items.column("dataset").take(item_codes).cast(pa.string()),
            "item_id": own.items.column("item_id").take(item_codes).cast(pa.string()),
            "item_hash": own.hashes.take(item_codes),
        }
    )
    conditions = list(own.conditions)
    store = own.conditions[0].store if own.conditions else ""
    other = pa.concat_tables(others) if others else None
    if other is not None:
        other = other.filter(pc.not_equal(other.column("store"), store))
        encoded = pc.dictionary_encode(
            pc.binary_join_element_wise(
                other.column("store"), other.column("condition"), "\x00"
            ).combine_chunks()
        )
        code = encoded.indices.to_numpy().astype(np.int64)
        _, first = np.unique(code, return_index=True)  # codes are in order of first row
        names = {n: other.column(n).take(pa.array(first)).to_pylist() for n in _NAMES}
        conditions += [Condition(*(names[n][c] for n in _NAMES)) for c in range(len(first))]
    shape = (len(conditions), len(item_codes))
    correct = np.zeros(shape)
    trials = np.zeros(shape)
    # This store's cells are distinct (condition, item) pairs: placed, not added up.
    where = (own.gen, column_of[own.item])
    correct[where] = own.correct
    trials[where] = own.trials
    del where
    if other is not None and other.num_rows:
        keys = ("dataset", "item_id", "item_hash")
        join = pc.binary_join_element_wise
        mine = join(*(items.column(k) for k in keys), "\x00")
        column = pc.index_in(join(*(other.column(k) for k in keys), "\x00"), value_set=mine)
        matched = pc.is_valid(column).to_numpy(zero_copy_only=False)
        theirs = (
            code[matched] + len(own.conditions),
            pc.fill_null(column, 0).to_numpy()[matched].astype(np.int64),
        )
        np.add.at(correct, theirs, other.column("correct").to_numpy()[matched])
        np.add.at(trials, theirs, other.column("trials").to_numpy()[matched])
    # A condition none of whose answers matched an item is no condition of the fit.
    live = trials.sum(1) > 0
    if not live.all():
        correct, trials = correct[live], trials[live]
    return ResponseMatrix(
        correct=correct,
        trials=trials,
        conditions=[c for c, keep in zip(conditions, live, strict=True) if keep],
        item_codes=item_codes,
        items=items,
    )

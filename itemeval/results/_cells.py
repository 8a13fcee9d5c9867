"""What the report, the statistics, the judges' analyses, IRT, `status` and the viewer compute
from: every grade of a plan's selection as a small row, and the solutions counted.

Read from each partition's cells (`itemeval.store` summaries: the best row of each key, small
columns only, from the partition's summary and the fragments it does not cover), one partition
at a time, restricted to the plan's selection like the long table (the design's conditions, the
selected items, epochs `0 .. replications-1`). Names become small integer codes:

* `grade`, `gen`: positions in `facets.grade` / `facets.generate`;
* `item`: position in `items` (the plan's selected items), `dataset`: position in `datasets`.

`grades`, a row per grade: `grade, gen, item, dataset, epoch, ok, error_code, score, correct,
parse_ok, parse_code, usd, cached, cached_input_tokens, batch, stale, valid`, where `stale`
marks a grade of another text than the answer stored now (their 64-bit text hashes differ) and
`valid` a final grade of the current answer (status ok, parsed, a verdict, not stale): the only
grades accuracy counts. Rows come in the order `grade, gen, item, epoch`, whatever the store's
layout. With `locations`, also `frag, pos`: the row's fragment (its position in
`grade_fragments[grade]`) and its place there, so a page fetches the texts it shows.

`solutions`, counted: a row per `gen, ok, error_code, cached, batch` with the answers (`rows`)
and the sums of `usd, input_tokens, output_tokens, cached_input_tokens, latency_ms`, and
`cache_usd`: what the response cache's answers among them would have cost at their price
(`priced.call_usd` over the plan's pricing table; 0 for paid rows). A reader that needs each
answer (the viewer) passes `on_solutions`, which sees each generate condition's located cells
as they are read.

`grade_hits`, counted: a row per `grade, gen` whose grades hold response-cache answers: how many
(`rows`) and what they would have cost (`cache_usd`, priced as for the solutions).

About 30 bytes a grade: ten million grades in 300 MB.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from itemeval._util.heap import release_unused_memory
from itemeval.planning import Plan
from itemeval.providers.money import ModelPrice
from itemeval.results._conditions import DesignFacets
from itemeval.results._fetch import plain_columns
from itemeval.results._priced import call_usd
from itemeval.store import GRADES, SOLUTIONS, ItemLookup, PartitionCells, read_partition_cells

_CODE = pa.int32()
#: What is read of a grade's cells besides its keys.
GRADE_CELL_COLUMNS = [
    "ok",
    "error_code",
    "score",
    "correct",
    "parse_ok",
    "parse_code",
    "usd",
    "cached",
    "cached_input_tokens",
    "batch",
    "solution_hash",
]
#: ... and of a solution's.
SOLUTION_CELL_COLUMNS = [
    "ok",
    "error_code",
    "cached",
    "batch",
    "usd",
    "input_tokens",
    "output_tokens",
    "cached_input_tokens",
    "latency_ms",
    "text_hash",
]
#: What the solutions are counted by, and what is summed (`cache_usd`: computed while read).
SOLUTION_GROUPS = ["gen", "ok", "error_code", "cached", "batch"]
SOLUTION_SUMS = [
    "usd",
    "input_tokens",
    "output_tokens",
    "cached_input_tokens",
    "latency_ms",
    "cache_usd",
]

#: Token counts a response-cache answer is priced by (`priced.call_usd`), and those of them a
#: grade's cells are read for besides `GRADE_CELL_COLUMNS`.
_TOKENS = ["input_tokens", "output_tokens", "cached_input_tokens"]
_GRADE_TOKENS = ["input_tokens", "output_tokens"]

#: Called with a generate condition's code and its located cells (`item` codes added).
SolutionsHook = Callable[[int, pa.Table], None]


@dataclass(frozen=True)
class StudyCells:
    """Everything the report computes from (see the module doc)."""

    facets: DesignFacets
    grades: pa.Table
    solutions: pa.Table  # counted: SOLUTION_GROUPS, rows, SOLUTION_SUMS
    items: pa.Table  # item_id, dataset (names) of every selected item, in plan order
    datasets: list[str]
    #: With `locations`: each grade condition's fragment names (`frag` codes index them).
    grade_fragments: list[list[str]] = field(default_factory=list)
    #: counted: grade, gen, rows, cache_usd of the grades answered from the response cache
    grade_hits: pa.Table = field(default_factory=lambda: GRADE_HITS_SCHEMA.empty_table())

    @property
    def expected_per_condition(self) -> int:
        """Generate cells each generate condition should have: items x epochs."""
        return self.items.num_rows * self.facets.epochs

    @property
    def answers(self) -> int:
        """Stored answers (solutions) in the selection."""
        return int(pc.sum(self.solutions.column("rows")).as_py() or 0)

    def valid_grades(self, grade: int | None = None) -> pa.Table:
        """Final grades of the current answer, of one grade condition (by code) or all."""
        mask = self.grades.column("valid")
        if grade is not None:
            mask = pc.and_(mask, pc.equal(self.grades.column("grade"), grade))
        if pc.all(mask).as_py() is not False:  # every grade: no copy of the study's grades
            return self.grades
        return self.grades.filter(mask)

    def item_ids(self, codes: list[int]) -> list[str]:
        return self.items.column("item_id").take(pa.array(codes, type=_CODE)).to_pylist()


def read_cells(
    plan: Plan,
    *,
    locations: bool = False,
    on_solutions: SolutionsHook | None = None,
    graders: Collection[str] | None = None,
    count_solutions: bool = True,
) -> StudyCells:
    """Read the plan's grades and count its solutions (see the module doc). `graders`: only
    these grade conditions' grades (by id; the others read as none); `count_solutions=False`:
    the solutions' text keys only (what `stale` needs), `solutions` left empty."""
    facets = DesignFacets.of(plan.design)
    items = plain_columns(plan.items.select(["item_id", "dataset"])).combine_chunks()
    datasets = [d.name for d in plan.datasets]
    placer = _ItemPlacer(items.column("item_id").combine_chunks(), facets.epochs)
    dataset_of = pc.index_in(items.column("dataset"), value_set=pa.array(datasets)).cast(_CODE)
    if isinstance(dataset_of, pa.ChunkedArray):
        dataset_of = dataset_of.combine_chunks()
    dataset_codes = dataset_of.to_numpy(zero_copy_only=False).astype(np.int32)
    epochs = facets.epochs
    n_items = items.num_rows

    counted = []
    #: per generate condition: the stored answer's text key per cell, and which cells have one
    hashes: list[tuple[np.ndarray, np.ndarray]] = []
    for code, condition in enumerate(facets.generate):
        counted_columns = SOLUTION_CELL_COLUMNS if count_solutions else ["text_hash"]
        wanted = ["item_id", "epoch", *counted_columns]
        if locations:
            wanted += ["fragment", "position"]
        partition = plan.store.partition(SOLUTIONS, condition.id)
        cells, item = placer.located(
            read_partition_cells(SOLUTIONS, partition, wanted, items=placer.lookup)
        )
        if count_solutions:
            price = plan.pricing.price(condition.model)
            cells = cells.append_column("cache_usd", pa.array(_cache_usd(price, cells)))
        # The stored answer's text key per cell (an error's is the empty text's).
        current = np.zeros(n_items * epochs, dtype=np.uint64)
        has = np.zeros(n_items * epochs, dtype=bool)
        cell = item.astype(np.int64) * epochs + cells.column("epoch").to_numpy()
        current[cell] = cells.column("text_hash").to_numpy()
        has[cell] = True
        hashes.append((current, has))
        if on_solutions is not None:
            on_solutions(code, cells.append_column("item", pa.array(item, _CODE)))
        if count_solutions:
            counted.append(_count_solutions(code, cells))
        del cells, item, cell

    grade_parts = []
    hit_parts = []
    grade_fragments: list[list[str]] = []
    for code, grader in enumerate(facets.grade):
        if graders is not None and grader.id not in graders:
            grade_fragments.append([])
            continue
        partition = plan.store.partition(GRADES, grader.id)
        extra = ["fragment", "position"] if locations else []
        names: dict[str, int] = {}  # fragment name -> its `frag` code in this partition
        price = plan.pricing.price(grader.grader_model) if grader.grader_model else None
        for gen, generate in enumerate(facets.generate):
            # A generate grader at a time: a summary's row groups are one grader's.
            cells, item = placer.located(
                read_partition_cells(
                    GRADES,
                    partition,
                    ["item_id", "epoch", *GRADE_CELL_COLUMNS, *_GRADE_TOKENS, *extra],
                    generate=[generate.id],
                    items=placer.lookup,
                )
            )
            if cells.num_rows:
                grade_parts.append(
                    _grade_part(code, gen, cells, item, hashes[gen], dataset_codes, epochs, names)
                )
                hit_parts.append(_count_hits(code, gen, price, cells))
            del cells, item
            # Only the kept part grows from one pair to the next: the pools would keep the
            # pages of each read (at 10M rows the reads' pages added up to 150 MB at the peak).
            pa.default_memory_pool().release_unused()
        grade_fragments.append(list(names))
    del hashes
    cells = StudyCells(
        facets=facets,
        grades=_concat(grade_parts, _grades_schema(locations)),
        solutions=_concat(counted, SOLUTIONS_SCHEMA),
        items=items,
        datasets=datasets,
        grade_fragments=grade_fragments,
        grade_hits=_concat(hit_parts, GRADE_HITS_SCHEMA),
    )
    del grade_parts, counted, hit_parts
    # The reads' buffers are freed now; arrow's pool and malloc would keep their pages for the
    # analyses that follow to grow on top of.
    release_unused_memory()
    return cells


def _cache_usd(price: ModelPrice | None, cells: pa.Table) -> np.ndarray:
    """Per cell: what its call would have cost at `price` if it was answered from the response
    cache (0 for a paid one)."""
    hits = _flag(cells, "cached")
    out = np.zeros(cells.num_rows, dtype=np.float64)
    if price is None or not hits.any():
        return out
    mask = pa.array(hits)
    inputs, outputs, cached = (
        pc.fill_null(cells.column(c).filter(mask), 0).to_numpy() for c in _TOKENS
    )
    out[hits] = call_usd(price, inputs, outputs, cached, _flag(cells, "batch")[hits])
    return out


def _flag(cells: pa.Table, column: str) -> np.ndarray:
    return pc.fill_null(cells.column(column), False).to_numpy(zero_copy_only=False).astype(bool)


def _count_hits(code: int, gen: int, price: ModelPrice | None, cells: pa.Table) -> pa.Table:
    """One (grade, generate) condition pair's response-cache answers counted, and what they
    would have cost at `price` (no row when there are none)."""
    hit = _flag(cells, "cached")
    rows = int(hit.sum())
    usd = float(_cache_usd(price, cells)[hit].sum()) if rows else 0.0
    present = [(code, gen, rows, usd)] if rows else []
    return pa.Table.from_pylist(
        [dict(zip(GRADE_HITS_SCHEMA.names, row, strict=True)) for row in present],
        schema=GRADE_HITS_SCHEMA,
    )


def _grade_part(
    code: int,
    gen: int,
    cells: pa.Table,
    item: np.ndarray,
    answers: tuple[np.ndarray, np.ndarray],
    dataset_codes: np.ndarray,
    epochs: int,
    names: dict[str, int],
) -> pa.Table:
    """One (grade, generate) condition pair's located grade cells as `grades` rows, in item
    and epoch order, `stale` and `valid` from the answers stored now (`answers`: the text key
    per cell and which cells have one)."""
    n = cells.num_rows
    epoch = cells.column("epoch").to_numpy().astype(np.int64)
    cell = item.astype(np.int64) * epochs + epoch
    text, has = answers
    # A grade of another text than the answer stored now (none stored: not stale).
    stale = has[cell] & (cells.column("solution_hash").to_numpy() != text[cell])
    ok = cells.column("ok").to_numpy(zero_copy_only=False)
    parse_ok = cells.column("parse_ok").to_numpy(zero_copy_only=False)
    verdict = cells.column("correct").is_valid().to_numpy(zero_copy_only=False)
    columns: dict[str, pa.Array | pa.ChunkedArray] = {
        "grade": pa.array(np.full(n, code, dtype=np.int32)),
        "gen": pa.array(np.full(n, gen, dtype=np.int32)),
        "item": pa.array(item, _CODE),
        "dataset": pa.array(dataset_codes[item] if n else np.zeros(0, np.int32)),
        "epoch": cells.column("epoch"),
        "ok": cells.column("ok"),
        "error_code": cells.column("error_code"),
        "score": cells.column("score"),
        "correct": cells.column("correct"),
        "parse_ok": cells.column("parse_ok"),
        "parse_code": cells.column("parse_code"),
        "usd": cells.column("usd"),
        "cached": cells.column("cached"),
        "cached_input_tokens": cells.column("cached_input_tokens"),
        "batch": cells.column("batch"),
        "stale": pa.array(stale),
        "valid": pa.array(ok & parse_ok & verdict & ~stale),
    }
    locations = "fragment" in cells.column_names
    if locations:
        encoded = pc.dictionary_encode(cells.column("fragment")).combine_chunks()
        codes = np.array(
            [names.setdefault(name, len(names)) for name in encoded.dictionary.to_pylist()],
            dtype=np.int32,
        )
        columns["frag"] = pa.array(codes[encoded.indices.to_numpy(zero_copy_only=False)])
        columns["pos"] = cells.column("position").cast(pa.int32())
    schema = _grades_schema(locations)
    part = pa.table(columns).select(schema.names).cast(schema)
    # One order whatever the store's layout (summaries, fragments, compactions): analyses that
    # resample or hold out rows see them in the same order.
    order = np.lexsort((epoch, item))
    if (np.diff(order) == 1).all():
        return part.combine_chunks()
    return part.take(pa.array(order)).combine_chunks()


class _ItemPlacer:
    """Where cells' items are among the plan's selected items (`ItemLookup`: one comparison
    when the cells are every selected cell in order, a hash look-up otherwise)."""

    def __init__(self, item_ids: pa.Array, epochs: int) -> None:
        self.lookup = ItemLookup(item_ids)
        self.epochs = epochs

    def located(self, read: PartitionCells) -> tuple[pa.Table, np.ndarray]:
        """The cells in the selection (an item of the plan, an epoch below `epochs`), and their
        item codes (positions among the selected items)."""
        cells = read.cells
        item = read.item_positions
        if item is None:
            item = self.lookup.positions(cells.column("item_id"))
        keep = (item >= 0) & (cells.column("epoch").to_numpy() < self.epochs)
        if keep.all():
            return cells, item
        return cells.filter(pa.array(keep)), item[keep]


def _count_solutions(code: int, cells: pa.Table) -> pa.Table:
    """A generate condition's located cells counted by `SOLUTION_GROUPS`."""
    if cells.num_rows == 0:
        return SOLUTIONS_SCHEMA.empty_table()
    work = cells.select([c for c in SOLUTION_GROUPS if c != "gen"] + SOLUTION_SUMS)
    grouped = work.group_by(
        [c for c in SOLUTION_GROUPS if c != "gen"], use_threads=False
    ).aggregate([([], "count_all")] + [(c, "sum") for c in SOLUTION_SUMS])
    grouped = grouped.rename_columns(
        ["rows" if n == "count_all" else n.removesuffix("_sum") for n in grouped.column_names]
    )
    grouped = grouped.append_column("gen", pa.array(np.full(grouped.num_rows, code, np.int32)))
    return grouped.select(SOLUTIONS_SCHEMA.names).cast(SOLUTIONS_SCHEMA)


SOLUTIONS_SCHEMA = pa.schema(
    [
        ("gen", _CODE),
        ("ok", pa.bool_()),
        ("error_code", pa.string()),
        ("cached", pa.bool_()),
        ("batch", pa.bool_()),
        ("rows", pa.int64()),
        ("usd", pa.float64()),
        ("input_tokens", pa.int64()),
        ("output_tokens", pa.int64()),
        ("cached_input_tokens", pa.int64()),
        ("latency_ms", pa.float64()),
        ("cache_usd", pa.float64()),
    ]
)
GRADE_HITS_SCHEMA: pa.Schema = pa.schema(
    [("grade", _CODE), ("gen", _CODE), ("rows", pa.int64()), ("cache_usd", pa.float64())]
)
_GRADES_SCHEMA = pa.schema(
    [
        ("grade", _CODE),
        ("gen", _CODE),
        ("item", _CODE),
        ("dataset", _CODE),
        ("epoch", pa.int32()),
        ("ok", pa.bool_()),
        ("error_code", pa.string()),
        ("score", pa.float64()),
        ("correct", pa.bool_()),
        ("parse_ok", pa.bool_()),
        ("parse_code", pa.string()),
        ("usd", pa.float64()),
        ("cached", pa.bool_()),
        ("cached_input_tokens", pa.int64()),
        ("batch", pa.bool_()),
        ("stale", pa.bool_()),
        ("valid", pa.bool_()),
    ]
)
_LOCATED_GRADES = pa.schema(
    [*_GRADES_SCHEMA, pa.field("frag", pa.int32()), pa.field("pos", pa.int32())]
)


def _grades_schema(locations: bool) -> pa.Schema:
    return _LOCATED_GRADES if locations else _GRADES_SCHEMA


def _concat(parts: list[pa.Table], schema: pa.Schema) -> pa.Table:
    """`parts` as one table of single-chunk columns. Takes the parts: the list is emptied,
    and each column's chunks are freed as soon as they are copied (a copy of every part at once
    took 275 MB more at the peak of a 10M-row report)."""
    tables = [p.select(schema.names).cast(schema) for p in parts if p.num_rows]
    parts.clear()
    if not tables:
        return schema.empty_table()
    columns = []
    for name in schema.names:
        chunks = [chunk for t in tables for chunk in t.column(name).chunks]
        columns.append(pa.chunked_array(chunks, type=schema.field(name).type).combine_chunks())
        del chunks
        tables = [t.drop_columns([name]) for t in tables]
    return pa.table(columns, schema=schema)

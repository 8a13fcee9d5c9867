"""A pairwise judge's other side: the baseline's current answers to a shard's cells."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from itemeval.store import SOLUTIONS, StudyStore

_COLUMNS = ["item_id", "epoch", "text", "text_hash", "status"]


def baseline_texts(
    store: StudyStore, base: str, wanted: pa.Table
) -> dict[tuple[str, int], tuple[str, str]]:
    """`(item_id, epoch) -> (text_hash, text)` of generate condition `base`'s current `ok`
    answers to the cells `wanted` (`item_id`, `epoch`): the store's rule among `ok` rows, as
    `deduplicate` picks. It reads the partition whole, then keeps the cells."""
    (rows,) = store.read_by_condition(SOLUTIONS, [base], _COLUMNS).values()
    rows = rows.filter(pc.equal(rows.column("status"), "ok"))
    if rows.schema.field("epoch").type != wanted.schema.field("epoch").type:
        rows = rows.set_column(
            rows.schema.get_field_index("epoch"),
            "epoch",
            rows.column("epoch").cast(wanted.schema.field("epoch").type),
        )
    rows = rows.join(wanted, ["item_id", "epoch"], join_type="inner")
    return {
        (i, e): (h, t)
        for i, e, h, t in zip(
            rows.column("item_id").to_pylist(),
            rows.column("epoch").to_pylist(),
            rows.column("text_hash").to_pylist(),
            rows.column("text").to_pylist(),
            strict=True,
        )
    }

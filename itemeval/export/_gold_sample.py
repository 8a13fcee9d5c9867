"""`itemeval plan --gold-sample N`: the answers a person labels, written as a labelling file.

The frame is every current answer (`ok` solution) of the plan's selection; the sample is
stratified by generate condition and dataset (`itemeval.judging._gold.sample_rows`: proportional,
at least one per stratum, seeded by `gold.seed`). The file (CSV) has the item, its question and
target, the condition, epoch and answer hash (which keep the label tied to this very answer), the
answer's text, and an empty `verdict` column to fill with pass or fail. No judge verdict is in it:
a labeller who saw one would lean towards it. An existing file is never overwritten (it may hold
someone's labels).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from itemeval.errors import InputError, Problem
from itemeval.judging._gold import sample_rows, write_labels_file
from itemeval.planning import Plan
from itemeval.results import ItemFetcher
from itemeval.storage import resolve
from itemeval.store import SOLUTIONS


@dataclass(frozen=True)
class GoldSample:
    path: str
    rows: int
    answers: int  # the frame: current answers in the selection
    strata: int


def write_gold_sample(plan: Plan, n: int, out: str | None = None) -> GoldSample:
    if n < 1:
        raise InputError(Problem("must be at least 1", field="--gold-sample"))
    target = out or f"{plan.study.study}-gold-sample.csv"
    location = resolve(target, plan.study.options_by_url().for_url(target))
    if location.exists():
        raise InputError(
            Problem(
                f"{target} exists (it may hold labels): nothing was written",
                field="--gold-out",
                hint="name another file with --gold-out, or move this one away",
            )
        )
    design = plan.design
    selected = plan.items.select(["item_id", "dataset"])
    wanted = selected.column("item_id")
    datasets = dict(zip(wanted.to_pylist(), selected.column("dataset").to_pylist(), strict=True))
    stored = plan.store.read_by_condition(
        SOLUTIONS,
        [c.id for c in design.generate],
        ["item_id", "epoch", "status", "text", "text_hash"],
    )
    frames = []
    for condition in design.generate:
        table = stored[condition.id]
        keep = pc.and_(
            pc.equal(table.column("status"), "ok"),
            pc.and_(
                pc.is_in(table.column("item_id"), value_set=wanted),
                pc.less(table.column("epoch"), design.epochs),
            ),
        )
        table = table.filter(keep)
        frames.append(
            table.append_column("condition", pa.repeat(pa.scalar(condition.slug), table.num_rows))
        )
    frame = pa.concat_tables(frames) if frames else pa.table({})
    if frame.num_rows == 0:
        raise InputError(
            Problem(
                "no answers to sample: nothing is generated in this selection yet",
                hint="run the study (or its generate stage) first",
            )
        )
    items = frame.column("item_id").to_pylist()
    conditions = frame.column("condition").to_pylist()
    strata = np.array([f"{c}\x1f{datasets[i]}" for c, i in zip(conditions, items, strict=True)])
    chosen = sample_rows(strata, n, plan.study.gold.seed)
    sample = frame.take(pa.array(chosen, type=pa.int64()))
    snapshots = {d.name: d.snapshot for d in plan.datasets if d.snapshot is not None}
    ids = sorted(set(sample.column("item_id").to_pylist()))
    fetched = ItemFetcher(plan.items, snapshots, ["input", "target"]).take(
        pa.array(ids, type=pa.string())
    )
    text = {
        i: (q, t)
        for i, q, t in zip(
            ids,
            fetched.column("input").to_pylist(),
            fetched.column("target").to_pylist(),
            strict=True,
        )
    }
    rows = []
    for row in sample.to_pylist():
        question, answer_target = text.get(row["item_id"], ("", ""))
        rows.append(
            {
                "item_id": row["item_id"],
                "dataset": datasets[row["item_id"]],
                "condition": row["condition"],
                "epoch": row["epoch"],
                "answer_hash": row["text_hash"],
                "question": question,
                "target": answer_target,
                "answer": row["text"],
                "verdict": "",
            }
        )
    if location.is_local:
        os.makedirs(os.path.dirname(location.path) or ".", exist_ok=True)
    location.write_atomic(write_labels_file(rows))
    return GoldSample(location.url, len(rows), frame.num_rows, len(set(strata.tolist())))

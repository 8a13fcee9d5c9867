"""A study's pairwise judges: every pairwise judge's stored verdicts, analysed.

`study_pairwise` reads the grades of the design's pairwise conditions (one per order) and the
lengths of the answers compared, and hands them to `itemeval.judging.analyse_pairwise`: what
the report shows, `export` writes as `pairwise.json` and `Study.pairwise()` returns.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow.compute as pc

from itemeval.judging._pairwise import PairwiseAnalysis, analyse_pairwise
from itemeval.planning import Plan
from itemeval.store import GRADES, SOLUTIONS


def _lengths(plan: Plan, gen_ids: list[str]) -> dict[tuple[str, str, int], int]:
    """`(gen id, item, epoch) -> characters` of each current `ok` answer."""
    out: dict[tuple[str, str, int], int] = {}
    tables = plan.store.read_by_condition(
        SOLUTIONS, gen_ids, ["item_id", "epoch", "text", "status"]
    )
    for gen, table in tables.items():
        table = table.filter(pc.equal(table.column("status"), "ok"))
        lengths = pc.utf8_length(table.column("text")).to_pylist()
        for item, epoch, length in zip(
            table.column("item_id").to_pylist(),
            table.column("epoch").to_pylist(),
            lengths,
            strict=True,
        ):
            out[(gen, item, int(epoch))] = int(length)
    return out


def study_pairwise(plan: Plan) -> list[PairwiseAnalysis]:
    """One analysis per pairwise grader and rubric (its two orders together); empty without."""
    groups: dict[tuple[str | None, str | None], list[Any]] = {}
    for cond in plan.design.pairwise:
        key = (cond.grader_name, cond.rubric.sha256 if cond.rubric else None)
        groups.setdefault(key, []).append(cond)
    if not groups:
        return []
    names = {g.id: g.slug for g in plan.design.generate}
    lengths = _lengths(plan, list(names))
    out = []
    for conds in groups.values():
        rows: dict[str, list[Any]] = {"cond": [], "item": [], "first": [], "score": [], "diff": []}
        tables = plan.store.read_by_condition(
            GRADES,
            [c.id for c in conds],
            ["gen_condition_id", "item_id", "epoch", "status", "score"],
        )
        baseline = ""
        for cond in conds:
            pairwise = cond.pairwise
            assert pairwise is not None
            table = tables[cond.id]
            table = table.filter(pc.equal(table.column("status"), "ok"))
            for gen, item, epoch, score in zip(
                table.column("gen_condition_id").to_pylist(),
                table.column("item_id").to_pylist(),
                table.column("epoch").to_pylist(),
                table.column("score").to_pylist(),
                strict=True,
            ):
                base = pairwise.baselines.get(gen)
                if base is None or gen not in names:
                    continue
                baseline = names[base]
                mine = lengths.get((gen, item, int(epoch)))
                theirs = lengths.get((base, item, int(epoch)))
                rows["cond"].append(names[gen])
                rows["item"].append(item)
                rows["first"].append(pairwise.condition_first)
                rows["score"].append(score)
                rows["diff"].append(
                    np.nan if mine is None or theirs is None else float(mine - theirs)
                )
        if not rows["cond"]:
            continue
        first = np.array(rows["first"], dtype=bool)
        # The verdict as shown: the condition's outcome turned back to the first-shown side.
        verdicts: list[str | None] = []
        for score, shown_first in zip(rows["score"], first, strict=True):
            if score is None:
                verdicts.append(None)
                continue
            side = score if shown_first else 1.0 - score
            verdicts.append({1.0: "first", 0.0: "second", 0.5: "tie"}.get(side))
        diff = np.array(rows["diff"], dtype=float)
        out.append(
            analyse_pairwise(
                condition=rows["cond"],
                baseline=baseline,
                item=rows["item"],
                condition_first=first,
                verdict=verdicts,
                length_diff=np.nan_to_num(diff),
            )
        )
    return out

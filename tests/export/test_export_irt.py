"""`itemeval analyze irt` on the demo-like store: the files it writes, another store's
conditions matched by item content, and the report's flagged items."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from export_studies import Run

from itemeval.api import Study
from itemeval.cli.main import main
from itemeval.errors import ExitCode
from itemeval.irt import analyze_irt
from itemeval.report import report_data
from itemeval.storage import resolve


def test_analyze_irt_writes_parameters_with_their_provenance(demo_run: Run, capsys):
    code = main(["analyze", "irt", str(demo_run.study_path), "--json"])
    assert code == ExitCode.OK
    out = json.loads(capsys.readouterr().out)
    assert len(out["conditions"]) == 6
    # abilities order the simulated models as their known strength does
    by_model: dict[str, list[float]] = {}
    for c in out["conditions"]:
        by_model.setdefault(c["model"], []).append(c["ability"])
    assert min(by_model["strong"]) > max(by_model["medium"]) > max(by_model["weak"])
    assert all(c["low"] < c["ability"] < c["high"] for c in out["conditions"])
    folder = resolve(out["written"])
    items = pq.read_table(io.BytesIO(folder.join("items.parquet").read_bytes()))
    responses = pq.read_table(io.BytesIO(folder.join("responses.parquet").read_bytes()))
    assert items.num_rows == out["items"]
    assert set(responses.column("store").to_pylist()) == {demo_run.store_url}
    # the binomial counts are the long table's final scorer grades, cell by cell
    long = Study.from_yaml(demo_run.study_path).results().to_pylist()
    expected: dict[tuple[str, str], list[int]] = {}
    for r in long:
        final = r["grade_status"] == "ok" and r["correct"] is not None and not r["grade_stale"]
        if r["grader_kind"] == "scorer" and final:
            cell = expected.setdefault((r["gen_condition_id"], r["item_id"]), [0, 0])
            cell[0] += int(r["correct"])
            cell[1] += 1
    got = {
        (c, i): [k, n]
        for c, i, k, n in zip(
            *(
                responses.column(x).to_pylist()
                for x in ("condition", "item_id", "correct", "trials")
            ),
            strict=True,
        )
    }
    assert got == expected
    assert demo_run.plan().item_count == items.num_rows
    fit = json.loads(folder.join("fit.json").read_text())
    assert fit["stores"] == [demo_run.store_url]


def test_other_stores_add_conditions_matched_by_content(demo_run: Run, tmp_path: Path):
    plan = demo_run.plan()
    first = analyze_irt(plan, held_out=False)
    # Another store's responses: the same items under other condition ids, one item's text
    # changed (its hash no longer matches: left out).
    source = resolve(first.written).join("responses.parquet")
    table = pq.read_table(io.BytesIO(source.read_bytes()))
    other = tmp_path / "other"
    (other / "analysis" / "irt").mkdir(parents=True)
    conditions = [c + "-other" for c in table.column("condition").to_pylist()]
    hashes = table.column("item_hash").to_pylist()
    changed = table.column("item_id")[0].as_py()
    hashes = [
        "0" * 16 if i == changed else h
        for i, h in zip(table.column("item_id").to_pylist(), hashes, strict=True)
    ]
    import pyarrow as pa

    table = table.set_column(1, "condition", pa.array(conditions))
    table = table.set_column(
        table.column_names.index("store"), "store", pa.array([str(other)] * table.num_rows)
    )
    table = table.set_column(table.column_names.index("item_hash"), "item_hash", pa.array(hashes))
    pq.write_table(table, other / "analysis" / "irt" / "responses.parquet")
    both = analyze_irt(plan, with_stores=[str(other)], write=False, held_out=False)
    assert len(both.conditions) == 2 * len(first.conditions)
    theirs = [c for c in both.conditions if c.store == str(other)]
    assert all(c.items == len(first.items) - 1 for c in theirs)


def test_missing_other_store_is_a_clear_error(demo_run: Run, tmp_path: Path, capsys):
    code = main(
        [
            "analyze",
            "irt",
            str(demo_run.study_path),
            "--no-write",
            "--with",
            str(tmp_path / "nowhere"),
        ]
    )
    assert code == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert "analyze irt" in err and "nowhere" in err


def test_report_lists_the_suspicious_items_next_to_their_text(demo_run: Run):
    data = report_data(demo_run.plan())
    assert data.irt is not None and data.irt.note is None
    assert data.irt.conditions == 6
    assert sum(data.irt.counts.values()) > 0
    assert all(i.input for i in data.irt.flagged)


@pytest.mark.parametrize("flag", ["all right"])
def test_flag_counts_match_the_observed_counts(demo_run: Run, flag):
    result = analyze_irt(demo_run.plan(), write=False, held_out=False)
    assert sum(1 for i in result.items if i.flag == flag) == sum(
        1 for i in result.items if i.trials and i.correct == i.trials
    )

"""Other tools read the store as it is: DuckDB and pandas (the SQL shown in docs/store.md)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pandas as pd

from itemeval.store import StudyStore, text_hash

DEDUP_SQL = """
SELECT * EXCLUDE (rn) FROM (
  SELECT *, row_number() OVER (
    PARTITION BY condition_id, item_id, epoch
    ORDER BY (status = 'ok') DESC, written_at DESC, filename DESC) AS rn
  FROM read_parquet('{root}/solutions/*/*.parquet', hive_partitioning = true, filename = true)
) WHERE rn = 1
"""


def _populate(store: StudyStore, solution, grade) -> None:
    store.write_solutions(
        "gen-a--000000000001", [solution("q1", ok=False), solution("q2", text="B")]
    )
    store.write_solutions("gen-a--000000000001", [solution("q1", text="A")])
    store.write_solutions("gen-b--000000000002", [solution("q1", text="A2")])
    store.write_grades(
        "judge--000000000003",
        [grade("gen-a--000000000001", "q1", solution_hash=text_hash("A"), score=0.5)],
    )
    # A killed writer's temporary file must not disturb any reader.
    partition = store.partition("solutions", "gen-a--000000000001")
    partition.join(".tmp-x.part").write_atomic(b"partial")


def test_duckdb_reads_and_deduplicates_like_the_store(tmp_path: Path, solution, grade) -> None:
    store = StudyStore.open(tmp_path / "study")
    _populate(store, solution, grade)
    ours = store.read_solutions(columns=["item_id", "epoch", "status", "text"])
    con = duckdb.connect()
    theirs = con.sql(
        "SELECT condition_id, item_id, epoch, status, text FROM ("
        + DEDUP_SQL.format(root=store.root.path)
        + ") ORDER BY condition_id, item_id, epoch"
    ).fetchall()
    assert theirs == [tuple(r.values()) for r in ours.to_pylist()]
    joined = con.sql(
        f"""
        SELECT g.grade_condition_id, s.condition_id, s.item_id, g.score
        FROM read_parquet('{store.root.path}/grades/*/*.parquet', hive_partitioning = true) g
        JOIN ({DEDUP_SQL.format(root=store.root.path)}) s
          ON s.condition_id = g.gen_condition_id AND s.item_id = g.item_id
         AND s.epoch = g.epoch AND s.text_hash = g.solution_hash
        """
    ).fetchall()
    assert joined == [("judge--000000000003", "gen-a--000000000001", "q1", 0.5)]


def test_pandas_reads_the_hive_layout(tmp_path: Path, solution, grade) -> None:
    store = StudyStore.open(tmp_path / "study")
    _populate(store, solution, grade)
    frame = pd.read_parquet(tmp_path / "study" / "solutions")
    assert len(frame) == 4  # physical rows, before deduplication
    assert sorted(frame["condition_id"].astype(str).unique()) == [
        "gen-a--000000000001",
        "gen-b--000000000002",
    ]
    best = (
        frame.assign(ok=frame["status"].eq("ok"))
        .sort_values(["ok", "written_at"], ascending=False)
        .drop_duplicates(["condition_id", "item_id", "epoch"])
    )
    assert len(best) == 3 and set(best["status"]) == {"ok"}

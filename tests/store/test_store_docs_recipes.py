"""docs/store.md's recipes for reading the store with other tools, run as written.

Every fenced block under a `<!-- recipe: NAME -->` marker is taken from the doc itself (only the
placeholder study root and, for the explicit-endpoint variant, `endpoint_url=None` are
replaced), so the doc and this test cannot drift. Results are checked against the store's own
deduplicated read.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import duckdb
import fsspec
import pandas as pd
import pyarrow as pa
import pytest
from packaging.version import Version
from s3_servers import make_bucket

from itemeval.store import StudyStore, compact, text_hash

DOC = Path(__file__).resolve().parents[2] / "docs" / "store.md"
_RECIPE = re.compile(r"<!-- recipe: ([\w-]+) -->\n```(\w+)\n(.*?)```", re.S)
S3_ROOT = "my-bucket/studies/demo"  # the doc's placeholder study root (without s3://)
LOCAL_ROOT = "studies/demo"
NO_ENDPOINT = "endpoint_url=None"

GEN_A, GEN_B, JUDGE = "gen-a--000000000001", "gen-b--000000000002", "judge--000000000003"
KEY = ["condition_id", "item_id", "epoch"]
COLUMNS = [*KEY, "status", "text"]


def recipe(name: str) -> str:
    found = {n: code for n, _, code in _RECIPE.findall(DOC.read_text(encoding="utf-8"))}
    assert name in found, f"docs/store.md has no block marked <!-- recipe: {name} -->"
    return found[name]


def run(name: str, namespace: dict[str, Any], **replace: str) -> dict[str, Any]:
    code = recipe(name)
    for old, new in replace.items():
        assert code.count(old) == 1, f"recipe {name} should contain {old!r} once"
        code = code.replace(old, new)
    exec(compile(code, f"docs/store.md <!-- recipe: {name} -->", "exec"), namespace)
    return namespace


def _populate(store: StudyStore, solution, grade) -> None:
    store.write_solutions(GEN_A, [solution("q1", ok=False), solution("q2", text="B")])
    store.write_solutions(GEN_A, [solution("q1", text="A")])
    store.write_solutions(GEN_B, [solution("q1", text="A2")])
    store.write_solutions(GEN_B, [solution("q1", ok=False)])  # a later error loses to the ok
    store.write_grades(
        JUDGE,
        [
            grade(GEN_A, "q1", solution_hash=text_hash("A"), ok=False),
            grade(GEN_A, "q2", solution_hash=text_hash("an older answer"), score=0.0),
        ],
    )
    store.write_grades(JUDGE, [grade(GEN_A, "q1", solution_hash=text_hash("A"), score=0.5)])
    # A compacted partition holds its summary beside its fragment: no recipe reads it as one.
    compact(store, conditions=[JUDGE])
    # A killed writer's temporary file and a leftover probe object disturb no reader.
    partition = store.partition("solutions", GEN_A)
    partition.join(".tmp-x.part").write_atomic(b"partial")
    partition.join(".itemeval-probe-x").write_atomic(b"first")


def _store_rows(store: StudyStore) -> list[tuple]:
    table = store.read_solutions(columns=COLUMNS[1:])
    return sorted(tuple(row.values()) for row in table.to_pylist())


def _rows(frame: Any) -> list[tuple]:
    """(condition_id, item_id, epoch, status, text) rows of a polars or pandas frame, sorted."""
    columns = [
        frame[c].to_list() if hasattr(frame[c], "to_list") else list(frame[c]) for c in COLUMNS
    ]
    return sorted((str(c), i, int(e), s, t) for c, i, e, s, t in zip(*columns, strict=True))


def _check_duckdb(con: duckdb.DuckDBPyConnection, store: StudyStore) -> None:
    joined = con.sql(recipe("duckdb-queries")).fetchall()
    assert joined == [(JUDGE, GEN_A, "q1", 0, 0.5)]
    best = con.sql(f"SELECT {', '.join(COLUMNS)} FROM best_solutions ORDER BY ALL").fetchall()
    assert best == _store_rows(store)
    grades = con.sql(
        "SELECT gen_condition_id, item_id, status, score FROM best_grades ORDER BY ALL"
    ).fetchall()
    theirs = store.read_grades(columns=["gen_condition_id", "item_id", "status", "score"])
    assert grades == sorted(tuple(r.values())[1:] for r in theirs.to_pylist())
    physical = con.sql("SELECT count(*) FROM solutions").fetchall()
    assert physical == [(5,)]  # every physical row, the temporary and probe files ignored
    loaded = {
        n
        for (n,) in con.sql(
            "SELECT extension_name FROM duckdb_extensions() WHERE loaded"
        ).fetchall()
    }
    assert not loaded & {"httpfs", "aws"}, loaded


# -- local disk ----------------------------------------------------------------------------
def test_duckdb_views_and_queries_on_a_local_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, solution, grade
) -> None:
    store = StudyStore.open(tmp_path / LOCAL_ROOT)
    _populate(store, solution, grade)
    monkeypatch.chdir(tmp_path)  # the recipe's relative path, as a user would run it
    con = duckdb.connect()
    con.execute(recipe("duckdb-local"))
    _check_duckdb(con, store)


def test_pandas_reads_a_local_store(tmp_path: Path, solution, grade) -> None:
    store = StudyStore.open(tmp_path / "study")
    _populate(store, solution, grade)
    frame = pd.read_parquet(tmp_path / "study" / "solutions")
    assert len(frame) == 5  # physical rows, before deduplication
    assert sorted(frame["condition_id"].astype(str).unique()) == [GEN_A, GEN_B]


# -- S3 --------------------------------------------------------------------------------------
@pytest.fixture(params=["moto-env", "moto-endpoint", "seaweedfs-endpoint"])
def s3_study(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, solution, grade
) -> tuple[StudyStore, dict[str, str]]:
    """A populated store on S3 and the replacements that point the doc's setup block at it."""
    bucket = f"docs-{uuid.uuid4().hex[:12]}"
    if request.param.startswith("moto"):
        endpoint = request.getfixturevalue("s3_server")
        options: dict[str, Any] = {"endpoint_url": endpoint}
    else:
        options = request.getfixturevalue("seaweedfs_server")
        endpoint = options["endpoint_url"]
    make_bucket(options, bucket)
    store = StudyStore.open(f"s3://{bucket}/studies/demo", options)
    _populate(store, solution, grade)
    replace = {f'"{S3_ROOT}"': f'"{bucket}/studies/demo"'}
    if request.param.endswith("-endpoint"):
        # Only the recipe names the endpoint; the credentials stay in the environment.
        monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", options.get("key", "testing"))
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", options.get("secret", "testing"))
        replace[NO_ENDPOINT] = f'endpoint_url="{endpoint}"'
    return store, replace


def test_duckdb_reads_s3_through_s3fs_without_extensions(s3_study) -> None:
    store, replace = s3_study
    namespace = run("s3-setup", {}, **replace)
    run("duckdb-s3", namespace)
    _check_duckdb(namespace["con"], store)


def test_pyarrow_dataset_reads_s3_with_hive_partitioning(s3_study) -> None:
    _, replace = s3_study
    namespace = run("pyarrow-s3", run("s3-setup", {}, **replace))
    ok_rows: pa.Table = namespace["ok_rows"]
    assert ok_rows.schema.field("condition_id").type == pa.string()
    got = sorted(
        zip(*(ok_rows[c].to_pylist() for c in ("condition_id", "item_id", "text")), strict=True)
    )
    assert got == [(GEN_A, "q1", "A"), (GEN_A, "q2", "B"), (GEN_B, "q1", "A2")]


def test_polars_reads_s3_through_the_pyarrow_dataset(s3_study) -> None:
    pytest.importorskip("polars", reason="polars is not installed: pip install polars (dev extra)")
    store, replace = s3_study
    namespace = run("pyarrow-s3", run("s3-setup", {}, **replace))
    run("polars-s3", namespace)
    assert _rows(namespace["best"]) == _store_rows(store)


def test_pandas_reads_s3(s3_study) -> None:
    if Version(pd.__version__) >= Version("3") and Version(fsspec.__version__) < Version("2025.7"):
        pytest.skip("pandas 3 takes fsspec filesystems from fsspec 2025.7.0 on (as the doc says)")
    store, replace = s3_study
    namespace = run("pandas-s3", run("s3-setup", {}, **replace))
    assert len(namespace["df"]) == 5  # physical rows
    assert _rows(namespace["best"]) == _store_rows(store)

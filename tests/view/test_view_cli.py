"""`itemeval view` on the command line and `Study.view()`: the server starts on the study's
store, answers on 127.0.0.1, and a port already taken is a clear error (exit 2)."""

from __future__ import annotations

import json
import socket
import urllib.request
from pathlib import Path

from itemeval.api import Study
from itemeval.cli.main import main
from itemeval.cli.view import DEFAULT_PORT
from itemeval.planning import Plan
from itemeval.view import DEFAULT_PORT as VIEW_PORT
from itemeval.view._index import PAGE_COLUMNS


def test_study_view_serves_the_store(study_plan: Plan) -> None:
    assert DEFAULT_PORT == VIEW_PORT
    study = Study(study_plan.study)
    server = study.view(port=0, open_browser=False, block=False)
    try:
        assert server.url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(server.url + "api/version", timeout=10) as response:
            payload = json.load(response)
        assert payload["solutions"] == study_plan.store.read_solutions(None, ["epoch"]).num_rows
        # once the overview is computed the index keeps only what pages read
        cells = server.state.index.cells
        assert cells.grades.column_names == PAGE_COLUMNS["grades"]
        assert server.state.index.answers.num_rows == payload["solutions"]
    finally:
        server.stop()


def test_port_in_use_is_bad_input(study_plan: Plan, capsys) -> None:  # type: ignore[no-untyped-def]
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    try:
        port = taken.getsockname()[1]
        code = main(["view", str(study_plan.study.path), "--port", str(port), "--no-open"])
    finally:
        taken.close()
    assert code == 2
    err = capsys.readouterr().err
    assert f"127.0.0.1:{port}" in err and "--port 0" in err


def test_overview_leaderboard_is_the_reports(study_plan: Plan) -> None:
    """The overview ranks from the index's per-item counts; the report from its own cells: the
    same conditions, order, accuracies and intervals."""
    from itemeval.report import Bootstrap
    from itemeval.report._summary import leaderboard
    from itemeval.view._index import build_index
    from itemeval.view._queries import overview

    index = build_index(study_plan)
    bootstrap = Bootstrap(resamples=300, seed=3)
    report = leaderboard(index.cells, bootstrap)
    ours = overview(index, bootstrap).board
    assert ours == report
    assert len(ours.conditions) == 6 and len(ours.models) == 3
    assert all(len(line.accuracy) == 2 for line in ours.conditions)


def test_overview_tiers_are_the_leaderboards(study_plan: Plan) -> None:
    """The overview's tier and rank interval per condition are the report leaderboard's (its
    paired comparisons), computed from the index's per-item counts."""
    from itemeval.report import Bootstrap
    from itemeval.report._data import headline_family
    from itemeval.report._summary import leaderboard
    from itemeval.statistics import analysis_options, plan_statistics, rank_text
    from itemeval.view._index import build_index
    from itemeval.view._queries import overview

    index = build_index(study_plan)
    bootstrap = Bootstrap(resamples=300, seed=3)
    options = analysis_options(study_plan, bootstrap.resamples, bootstrap.seed)
    statistics = plan_statistics(study_plan, options, cells=index.cells, headline_only=True)
    family = headline_family(statistics, leaderboard(index.cells, bootstrap))
    assert family is not None
    by_slug = {g.slug: g.id for g in index.facets.generate}  # the family names conditions
    expected = {
        by_slug.get(unit, unit): f"{family.tiers[u]} (rank {rank_text(family, u)})"
        for u, unit in enumerate(family.units)
    }
    assert overview(index, bootstrap).tiers == expected
    assert len(set(family.tiers)) > 1  # the small study's conditions are not all one tier


def test_index_of_a_compacted_store_is_the_same(study_plan: Plan, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A compacted store (a file per generate condition in each grade partition, read through
    its summary) and a run's fragments give the same rows, counts and texts."""
    import shutil

    import numpy as np

    from itemeval.planning import make_plan
    from itemeval.store import StudyStore, compact
    from itemeval.view._answers import item_detail
    from itemeval.view._index import build_index

    copy = tmp_path / "store"
    shutil.copytree(study_plan.store.root.path, copy)
    compact(StudyStore.open(str(copy)))
    compacted = make_plan(study_plan.study, store_url=str(copy), with_pending=False)
    before, after = build_index(study_plan), build_index(compacted)
    generate = len(study_plan.design.generate)
    assert all(len(w.fragments) == generate for w in after.grade_where)
    assert all(len(w.fragments) == 1 for w in after.solution_where)
    for name in ("correct_by_grade", "graded_by_grade", "errors", "parse_failures", "disagree"):
        assert np.array_equal(getattr(before, name), getattr(after, name)), name
    item_id = before.item_ids[3].as_py()
    texts = [
        [(a.key, a.fields["text"], [g.fields["judge_text"] for g in a.grades]) for a in i.answers]
        for i in (item_detail(before, item_id), item_detail(after, item_id))
    ]
    assert texts[0] == texts[1] and len(texts[0]) == 6 * study_plan.design.epochs


def test_overview_costs_and_errors_are_the_reports(study_plan: Plan) -> None:
    """The overview's costs are taken a generate condition at a time over the index's narrow
    columns, its errors over a projection of them: the numbers of the report's own reader."""
    import dataclasses

    import pytest

    from itemeval.report import costs, errors
    from itemeval.results import read_cells
    from itemeval.view._index import build_index
    from itemeval.view._queries import overview

    index = build_index(study_plan)
    cells = read_cells(study_plan)
    ours = overview(index)
    report = {c.generate.id: c for c in costs(cells, study_plan.pricing)}
    assert ours.costs.keys() == report.keys() and len(report) == 6
    for key, line in report.items():
        mine = dataclasses.asdict(ours.costs[key])
        for name, value in dataclasses.asdict(line).items():
            assert mine[name] == (pytest.approx(value) if isinstance(value, float) else value)
    assert any(line.graded and line.generation_usd for line in report.values())
    assert ours.errors == errors(cells)
    assert ours.errors.coverage and any(c.errors or c.parse_failures for c in ours.errors.coverage)


def test_index_columns_are_one_chunk_each(study_plan: Plan) -> None:
    """The index's tables are combined into one chunk per column (a page's take is slow on many
    chunks): a row per stored answer and per stored grade."""
    from itemeval.view._index import build_index

    index = build_index(study_plan)
    for table in (index.answers, index.cells.grades):
        assert table.num_rows and all(c.num_chunks == 1 for c in table.columns)
    assert index.cells.grades.num_rows == study_plan.store.read_grades(None, ["epoch"]).num_rows
    assert index.answers.num_rows == study_plan.store.read_solutions(None, ["epoch"]).num_rows


def test_compacted_partition_in_small_row_groups_is_the_same(  # type: ignore[no-untyped-def]
    study_plan: Plan, tmp_path, monkeypatch
) -> None:
    """A compacted store (one fragment per generate condition in a grade partition, in row
    groups of 7 rows) gives the index the same rows and counts as the fragments a run wrote."""
    import shutil

    import numpy as np
    import pyarrow.parquet as pq

    from itemeval.planning import make_plan
    from itemeval.store import StudyStore, compact
    from itemeval.store import fragments as store_fragments
    from itemeval.view._index import build_index

    copy = tmp_path / "store"
    shutil.copytree(study_plan.store.root.path, copy)
    monkeypatch.setattr(store_fragments, "ROW_GROUP_ROWS", 7)
    monkeypatch.setattr("itemeval.store._compact_merge.ROW_GROUP_ROWS", 7)
    # The run compacted its partitions already: without their summaries (derived data) every
    # fragment is written again, in the small row groups.
    for summary in Path(copy).rglob("_summary"):
        summary.unlink()
    compact(StudyStore.open(str(copy)))
    compacted = make_plan(study_plan.study, store_url=str(copy), with_pending=False)
    before, after = build_index(study_plan), build_index(compacted)
    where = after.grade_where[0]
    assert len(where.fragments) == len(study_plan.design.generate)
    assert pq.ParquetFile(where.location.join(where.fragments[0]).path).num_row_groups > 10
    for name in ("correct_by_grade", "graded_by_grade", "errors", "parse_failures", "disagree"):
        assert np.array_equal(getattr(before, name), getattr(after, name)), name
    assert after.cells.grades.num_rows == before.cells.grades.num_rows


def test_view_reads_a_store_folder_and_refuses_an_empty_store(  # type: ignore[no-untyped-def]
    study_plan: Plan, tmp_path, capsys
) -> None:
    """`itemeval view FOLDER` reads the store folder as `--store` does (it gets as far as the
    port, taken here so that the command returns); a folder that holds no store, or a --store
    that names nothing stored, is bad input (exit 2) and nothing is created."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = str(taken.getsockname()[1])
    store = study_plan.store.root.url.removeprefix("file://")
    try:
        assert main(["view", store, "--port", port, "--no-open"]) == 2
        assert f"127.0.0.1:{port}" in capsys.readouterr().err
        assert main(["view", "--store", store, "--port", port, "--no-open"]) == 2
        assert f"127.0.0.1:{port}" in capsys.readouterr().err
    finally:
        taken.close()
    assert main(["view", str(tmp_path), "--no-open"]) == 2
    assert "no itemeval store here" in capsys.readouterr().err
    missing = tmp_path / "missing"
    study = str(study_plan.study.path)
    assert main(["view", study, "--store", str(missing), "--no-open"]) == 2
    err = capsys.readouterr().err
    assert "nothing stored here" in err and "--store" in err
    assert main(["view", "--store", str(missing), "--no-open"]) == 2
    assert not missing.exists()
    assert main(["view", store, "--store", store, "--no-open"]) == 2
    assert "--store names a store too" in capsys.readouterr().err

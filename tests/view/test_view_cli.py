"""`itemeval view` on the command line and `Study.view()`: the server starts on the study's
store, answers on 127.0.0.1, and a port already taken is a clear error (exit 2)."""

from __future__ import annotations

import json
import socket
import urllib.request

from itemeval.api import Study
from itemeval.cli.main import main
from itemeval.cli.view import DEFAULT_PORT
from itemeval.planning import Plan
from itemeval.view import DEFAULT_PORT as VIEW_PORT


def test_study_view_serves_the_store(study_plan: Plan) -> None:
    assert DEFAULT_PORT == VIEW_PORT
    study = Study(study_plan.study)
    server = study.view(port=0, open_browser=False, block=False)
    try:
        assert server.url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(server.url + "api/version", timeout=10) as response:
            payload = json.load(response)
        assert payload["solutions"] == study_plan.store.read_solutions(None, ["epoch"]).num_rows
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
    """The overview ranks from the index's per-item counts; the report from group-bys over the
    grades: the same conditions, order, accuracies and intervals."""
    from itemeval.export.report.summary import Bootstrap, leaderboard
    from itemeval.view.index import build_index
    from itemeval.view.queries import ranked

    index = build_index(study_plan)
    bootstrap = Bootstrap(resamples=300, seed=3)
    ours, report = ranked(index, bootstrap), leaderboard(index.cells, bootstrap)
    assert ours == report
    assert len(ours.conditions) == 6 and len(ours.models) == 3
    assert all(len(line.accuracy) == 2 for line in ours.conditions)

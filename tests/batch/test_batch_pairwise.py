"""A pairwise judge on the batch tier (`itemeval sim-server`'s OpenAI Batch API): its two
orders of every pair are batch rows at the batch price, nothing goes live, a re-run sends none."""

from __future__ import annotations

import pyarrow.compute as pc
from batch_files import rows, sim_server, write_study

from itemeval.config import load_study
from itemeval.errors import ExitCode
from itemeval.runtime import RunOptions, run_study

INLINE = RunOptions(no_ray=True, yes=True, quiet=True)
PAIRWISE = {
    "versus": {
        "model": "sim/judge",
        "endpoint": "judges",
        "max_tokens": 200,
        "kind": "pairwise",
        "baseline": "sim/weak",
    }
}


def test_pairwise_verdicts_go_through_a_batch(tmp_path):
    with sim_server("--batch-delay-s", "0.2") as server:
        path = write_study(
            tmp_path,
            server.url,
            items=5,
            **{
                "models": [
                    {"id": "sim/strong", "endpoint": "sim"},
                    {"id": "sim/weak", "endpoint": "sim"},
                ],
                "facets.grader": ["versus"],
                "graders": PAIRWISE,
            },
        )
        study = load_study(path)
        outcome = run_study(study, INLINE)
        stats = server.stats()
        assert outcome.exit_code == ExitCode.OK, outcome.message
        assert run_study(study, INLINE).status == "nothing_to_do"
        assert server.stats()["batch"]["submitted"] == stats["batch"]["submitted"]
    assert stats["requests"] == 0  # nothing went live
    grades = rows(study.store_url, "grades", ["grader", "tier", "cached", "score", "status"])
    judged = grades.filter(pc.equal(grades.column("grader"), "sim/judge"))
    assert judged.num_rows == 2 * 5  # sim/strong's 5 answers against sim/weak's, both orders
    assert set(judged.column("tier").to_pylist()) == {"batch"}
    assert set(judged.column("score").to_pylist()) <= {0.0, 0.5, 1.0}
    solutions = rows(study.store_url, columns=["cached"])
    paid = int(pc.sum(pc.invert(judged.column("cached"))).as_py()) + solutions.num_rows
    assert stats["batch"]["ok"] == paid

"""A backend that bills more than a call's reservation (output over `max_tokens`, input over
what its bytes bound): the first such reply stops the model's calls that were not yet sent until
their reservations cover the worst usage seen, so a capped run passes its cap by at most the
calls in flight then. Checked against the sim-server's own billed usage, priced independently."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime"))

from runtime_files import sim_server, sim_stats, write_study

from itemeval.config import load_study
from itemeval.providers.money import Pricing
from itemeval.providers.types import Usage
from itemeval.runtime import RunOptions, run_study

INLINE = RunOptions(no_ray=True, yes=True, quiet=True, stages=("generate",))
CONCURRENCY = 4


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ITEMEVAL_CACHE_DIR", str(tmp_path / "default-cache"))
    monkeypatch.setenv("ITEMEVAL_LIMITS_DIR", str(tmp_path / "limits"))


@pytest.mark.parametrize(
    "overreport", [("--overreport-output", "500"), ("--overreport-input", "3000")]
)
def test_a_reply_billing_more_than_reserved_stops_the_models_new_calls(tmp_path, overreport):
    max_usd = 0.05
    with sim_server("--latency-ms", "100", *overreport) as url:
        overrides = {
            "facets.grader": [],
            "facets.prompt": ["builtin:direct"],
            "facets.replications": 1,
            "endpoints.sim": {"kind": "sim", "base_url": url, "max_concurrency": CONCURRENCY},
            "models": [{"id": "sim/strong", "endpoint": "sim", "params": {"max_tokens": 16}}],
            "budget.dev_items": 60,
            "budget.max_usd": max_usd,
            "runtime.shard_size": 60,
        }
        study = load_study(write_study(tmp_path, **overrides))
        outcome = run_study(study, INLINE)
        stats = sim_stats(url)
    price = Pricing.load().price("sim/strong")
    billed = price.cost(Usage(stats["usage"]["input_tokens"], stats["usage"]["output_tokens"]))
    per_call = billed / stats["ok"]
    # Each call reserved a small part of what it billed; unchecked, all 60 would have been sent
    # (at about 6 to 8 times the cap). The cap stops the run, and what the server billed passes
    # the cap by at most the calls that were in flight when the first over-billed reply came.
    assert outcome.status == "budget_cap", outcome.message
    assert stats["ok"] < 60
    assert billed <= max_usd + CONCURRENCY * per_call, (billed, stats["ok"])
    assert outcome.spent_usd == pytest.approx(billed, rel=1e-6)

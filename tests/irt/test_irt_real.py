"""IRT on a real response matrix: MMLU-Pro answers of many models as Every Eval Ever instance
records under ../shared/data/every_eval_ever (skipped when this checkout has none).
benchmarks/irt_fit.py --eee DIR prints the same figures."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from benchmarks.irt_fit import read_eee
from itemeval.irt import FLAG_Q, discrimination_q, fit_irt, held_out_loglik


def mmlu_pro_folder(shared_data: Path) -> Path:
    files = [
        p
        for p in (shared_data / "every_eval_ever").rglob("*_samples.jsonl")
        if "mmlu_pro" in str(p).lower().replace("-", "_")
    ]
    folders = {p.parent.parent.parent for p in files}  # <benchmark>/<developer>/<model>/file
    if len(files) < 3 or len(folders) != 1:
        pytest.skip(f"no MMLU-Pro instance records of 3+ models under {shared_data}")
    return folders.pop()


def test_mmlu_pro_flags_only_strong_evidence_and_bounds_difficulty(shared_data: Path):
    correct, trials, models = read_eee(mmlu_pro_folder(shared_data))
    assert len(models) >= 3
    one = fit_irt(correct, trials, "1pl")
    two = fit_irt(correct, trials, "2pl", start=one)
    # difficulties are given only where the discrimination is clearly positive, and there
    # they stay within the abilities' reach
    assert np.abs(two.b[two.b_defined]).max() < 50
    _, q = discrimination_q(two, correct, trials)
    negative = int((two.a < 0).sum())
    flagged = int((q <= FLAG_Q).sum())
    assert flagged < negative  # the sign alone is not evidence
    assert (two.a[q <= FLAG_Q] < 0).all()
    count = min(2_000, correct.shape[1])
    items = np.random.default_rng(0).choice(correct.shape[1], count, replace=False)
    held = held_out_loglik(correct[:, items], trials[:, items])
    assert held.chosen in ("1pl", "2pl") and held.reason

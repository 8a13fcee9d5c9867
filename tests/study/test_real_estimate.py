"""Estimate over the real GSM8K and MMLU items (skips when ../shared/data is absent).

The speed of this (2,000 items x 6 conditions in well under 5 s) is measured by
`benchmarks/estimate_real.py`; this test checks the numbers are sensible.
"""

from __future__ import annotations

import json

import yaml
from study_files import REPO

from itemeval.cli.main import main


def real_study(tmp_path, shared_data):
    study = {
        "study": "real",
        "datasets": [
            {
                "name": "gsm8k",
                "path": str(shared_data / "gsm8k" / "test.jsonl"),
                "mapping": str(REPO / "configs" / "mappings" / "gsm8k.yaml"),
            },
            {
                "name": "mmlu",
                "path": str(shared_data / "mmlu" / "test" / "*.csv"),
                "mapping": str(REPO / "configs" / "mappings" / "mmlu.yaml"),
            },
        ],
        "endpoints": {"openai": {"kind": "openai", "api_key_env": "OPENAI_API_KEY"}},
        "models": [
            {"id": "gpt-4o-mini", "endpoint": "openai"},
            {"id": "gpt-4.1", "endpoint": "openai"},
            {"id": "gpt-4o", "endpoint": "openai"},
        ],
        "sampling": {"temperature": 0, "max_tokens": 1024},
        "facets": {"prompt": ["builtin:direct", "builtin:cot"]},
    }
    path = tmp_path / "real.yaml"
    path.write_text(yaml.safe_dump(study))
    return path


def test_real_gsm8k_mmlu_estimate(tmp_path, shared_data, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    path = real_study(tmp_path, shared_data)
    assert main(["estimate", str(path), "--limit", "1000", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["items"] == 2000
    generate = [c for c in payload["conditions"] if c["stage"] == "generate"]
    assert len(generate) == 6
    for line in generate:
        assert line["priced"], line["model"]
        # real prompts: GSM8K and MMLU questions average well over 40 tokens
        assert line["input_tokens"] / line["cells"] > 40
    cot = [c for c in generate if "_cot_" in c["condition"]]
    direct = [c for c in generate if "_direct_" in c["condition"]]
    assert min(c["output_tokens"] for c in cot) > max(c["output_tokens"] for c in direct)
    assert payload["total_usd"] > 0

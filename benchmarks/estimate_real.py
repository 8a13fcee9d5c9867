"""How long `itemeval estimate` takes over real items: GSM8K and MMLU from ../shared/data,
2,000 items (1,000 of each) x 6 conditions (3 models x 2 prompts).

    .venv/bin/python benchmarks/estimate_real.py [--shared-data ../shared/data]

Runs the command as a user would (a fresh process) and prints its wall time.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared-data", default=str(REPO.parent / "shared" / "data"))
    args = parser.parse_args()
    data = Path(args.shared_data)
    if not data.is_dir():
        print(f"skipped: no real data at {data}")
        return 0
    study = {
        "study": "real",
        "datasets": [
            {
                "name": "gsm8k",
                "path": str(data / "gsm8k" / "test.jsonl"),
                "mapping": str(REPO / "configs" / "mappings" / "gsm8k.yaml"),
            },
            {
                "name": "mmlu",
                "path": str(data / "mmlu" / "test" / "*.csv"),
                "mapping": str(REPO / "configs" / "mappings" / "mmlu.yaml"),
            },
        ],
        "endpoints": {"openai": {"kind": "openai", "api_key_env": "OPENAI_API_KEY"}},
        "models": [{"id": m, "endpoint": "openai"} for m in ("gpt-4o-mini", "gpt-4.1", "gpt-4o")],
        "facets": {"prompt": ["builtin:direct", "builtin:cot"]},
    }
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "real.yaml"
        path.write_text(yaml.safe_dump(study))
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "itemeval", "estimate", str(path), "--limit", "1000"],
            cwd=tmp,
            capture_output=True,
            text=True,
        )
        seconds = time.perf_counter() - started
    if done.returncode:
        print(done.stderr)
        return done.returncode
    total = [line for line in done.stdout.splitlines() if line.startswith("Total")]
    print(f"itemeval estimate, 2,000 items x 6 conditions: {seconds:.2f} s ({total[0]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

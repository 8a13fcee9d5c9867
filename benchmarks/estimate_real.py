"""How long `itemeval estimate` takes over real items: GSM8K and MMLU from ../shared/data,
2,000 items (1,000 of each) x 6 conditions (3 models x 2 prompts).

    .venv/bin/python benchmarks/estimate_real.py [--shared-data ../shared/data]
                                                 [--cached-epochs 3] [--text-kb 2]

Runs the command as a user would (a fresh process) and prints its wall time. With
`--cached-epochs N`, the response cache first gets N answers per item and condition (texts of
`--text-kb` KB, in fragments of 256 rows as the journal writes them), so the time includes the
calibration reading their usage columns.
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
    parser.add_argument("--cached-epochs", type=int, default=0)
    parser.add_argument("--text-kb", type=float, default=2.0)
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
        study["cache"] = {"location": str(Path(tmp) / "cache")}
        path.write_text(yaml.safe_dump(study))
        rows = fill_cache(path, args.cached_epochs, args.text_kb) if args.cached_epochs else 0
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
    cached = f", {rows:,} cached answers" if rows else ""
    print(f"itemeval estimate, 2,000 items x 6 conditions{cached}: {seconds:.2f} s ({total[0]})")
    return 0


def fill_cache(path: Path, epochs: int, text_kb: float) -> int:
    """`epochs` cached answers per item and condition, as a journal would have written them."""
    from itemeval.config import load_study
    from itemeval.planning import make_plan
    from itemeval.store import ResponseCache, cache_group

    study = load_study(path)
    plan = make_plan(study, limit=1000, with_pending=False)
    cache = ResponseCache.open(study.cache.location)
    items = plan.items.column("item_id").to_pylist()
    text = "x" * int(text_kb * 1024)
    written = 0
    for cond in plan.design.generate:
        group = cache_group(cond.model_id, cond.params.as_dict(), cond.prompt.sha256)
        cells = [(item, epoch) for item in items for epoch in range(epochs)]
        for start in range(0, len(cells), 256):
            cache.put(
                group,
                [
                    {
                        "key": f"{cond.id}-{item}-{epoch}",
                        "item_id": item,
                        "epoch": epoch,
                        "request_hash": "0" * 64,
                        "model": cond.model_id,
                        "text": text,
                        "input_tokens": 120,
                        "output_tokens": 40,
                    }
                    for item, epoch in cells[start : start + 256]
                ],
            )
        written += len(cells)
    return written


if __name__ == "__main__":
    sys.exit(main())

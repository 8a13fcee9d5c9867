"""Import throughput and memory: Every Eval Ever instance records per second, and the peak RSS
at two file sizes (memory flat in the file's size).

    .venv/bin/python benchmarks/import_throughput.py [--records 200000] [--items 2000]

Writes an aggregate record and a `_samples.jsonl` of `--records` instance lines (0.3.0, one
metric, ~600 bytes a line: input, reference, answer, token usage, metadata) over `--items`
distinct items and as many epochs as needed, then imports it into a fresh local store in a
child process (`itemeval import`, the command itself) and reads the child's wall time and peak
RSS (`resource.getrusage(RUSAGE_CHILDREN)`). Does it for the file and for a file 4x longer, and
prints records/s and MB of peak RSS for both. The child is the whole command: interpreter and
imports included (measured on its own: `itemeval --version`).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def write_records(folder: Path, records: int, items: int) -> Path:
    """An aggregate and its instance file with `records` lines over `items` items."""
    folder.mkdir(parents=True, exist_ok=True)
    uuid = "0c0ffee0-0000-4000-8000-000000000001"
    samples = folder / f"{uuid}_samples.jsonl"
    with open(samples, "w", encoding="utf-8") as out:
        for n in range(records):
            item, epoch = n % items, n // items
            correct = (n * 2654435761) % 7 < 4
            line = {
                "schema_version": "0.3.0",
                "evaluation_id": "bench/org_model/1",
                "model_id": "org/model",
                "evaluation_name": "bench",
                "evaluation_result_id": "bench/accuracy",
                "sample_id": f"item-{item:07d}",
                "interaction_type": "single_turn",
                "input": {
                    "raw": f"Question {item}: what is {item} plus {item * 7 % 13}? "
                    "Answer with a number only.",
                    "reference": [str(item + item * 7 % 13)],
                },
                "output": {"raw": [f"The answer is {item + (0 if correct else 1)}."]},
                "answer_attribution": [],
                "evaluation": {"score": 1.0 if correct else 0.0, "is_correct": correct},
                "token_usage": {"input_tokens": 42, "output_tokens": 9, "total_tokens": 51},
                "performance": {"latency_ms": 812.5},
                "metadata": {"epoch": str(epoch), "stop_reason": "stop"},
            }
            out.write(json.dumps(line) + "\n")
    aggregate = {
        "schema_version": "0.3.0",
        "evaluation_id": "bench/org_model/1",
        "retrieved_timestamp": "1760000000",
        "source_metadata": {
            "source_type": "evaluation_run",
            "source_organization_name": "benchmark",
            "evaluator_relationship": "third_party",
        },
        "eval_library": {"name": "benchmark", "version": "1"},
        "model_info": {
            "name": "model",
            "id": "org/model",
            "additional_details": {"deployment_type": "unknown", "model_availability": "unknown"},
        },
        "evaluation_results": [
            {
                "evaluation_result_id": "bench/accuracy",
                "evaluation_name": "bench",
                "source_data": {"dataset_name": "bench", "source_type": "other"},
                "metric_config": {"lower_is_better": False, "metric_name": "accuracy"},
                "score_details": {"score": 0.57},
                "generation_config": {"generation_args": {"temperature": 0.0, "max_tokens": 64}},
            }
        ],
        "detailed_evaluation_results": {"format": "jsonl", "file_path": samples.name},
    }
    (folder / f"{uuid}.json").write_text(json.dumps(aggregate))
    return folder


def run_child(args: list[str]) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (user + system) and peak RSS (MB) of `python -m itemeval
    ARGS` in a fresh child."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    before, cpu_before = usage.ru_maxrss, usage.ru_utime + usage.ru_stime
    start = time.perf_counter()
    env = dict(os.environ, PYTHONPATH=str(REPO))
    subprocess.run(
        [sys.executable, "-m", "itemeval", *args], check=True, env=env, stdout=subprocess.DEVNULL
    )
    wall = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = usage.ru_utime + usage.ru_stime - cpu_before
    return wall, cpu, max(usage.ru_maxrss, before) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--items", type=int, default=2_000)
    options = parser.parse_args()
    startup, startup_cpu, _ = run_child(["--version"])
    print(f"command start (itemeval --version): {startup:.2f} s wall, {startup_cpu:.2f} s CPU")
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as tmp:
        for scale in (1, 4):
            records = options.records * scale
            folder = write_records(Path(tmp) / f"src{scale}", records, options.items)
            size = sum(p.stat().st_size for p in folder.iterdir()) / 1e6
            # each size in its own child: ru_maxrss of children is the largest child so far,
            # so the smaller file goes first
            wall, cpu, peak = run_child(["import", str(folder), "--store", f"{tmp}/store{scale}"])
            print(
                f"{records:>9,} records ({size:,.0f} MB): {wall:6.2f} s wall "
                f"({records / wall:,.0f} records/s), {cpu:6.2f} s CPU "
                f"({records / cpu:,.0f} records per CPU second; "
                f"{records / max(cpu - startup_cpu, 1e-9):,.0f} without the command's start), "
                f"peak RSS {peak:,.0f} MB"
            )


if __name__ == "__main__":
    main()

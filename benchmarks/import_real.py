"""Imports of the logs the real tools wrote (tests/data/real_logs): each tool's own score
against the imported score, the records imported and rejected, and the rate.

    .venv/bin/python benchmarks/import_real.py [--repeat 3]

For each tool's folder of committed logs (inspect_ai, lm-eval, HELM, Every Eval Ever records),
imports it into a fresh local store (`itemeval.importing.import_sources`, in this process) and
reads back, from the long table `itemeval export` writes, each (tool, task, model, metric,
split) score: right answers over graded answers. Prints one Markdown row per score the tool
reports, with the tool's own (read by `tests/data/real_logs/own_scores.py` as the tool reports
it) and whether the two are equal; then one row per tool: files, graded samples imported,
records rejected, the best of `--repeat` wall times and the samples per second. Last, all the
folders at once into one store: the conditions against the (tool, task, model) triples the
tools reported. Exits 1 if any score differs or any condition is missing or doubled.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
REAL = REPO / "tests" / "data" / "real_logs"
sys.path.insert(0, str(REAL))

import own_scores  # noqa: E402  (the tools' own scores, read as each tool reports them)

from itemeval.importing import import_sources, read_imports  # noqa: E402
from itemeval.store import StudyStore  # noqa: E402


def _fmt(value: float) -> str:
    return f"{value:.6f}".rstrip("0").rstrip(".") if value == value else "n/a"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="imports per tool (best time)")
    args = parser.parse_args()
    failures = 0
    scores: list[str] = []
    tools: list[str] = []
    for tool in own_scores.READERS:
        folder = REAL / tool / "logs"
        best, result, store = float("inf"), None, ""
        for _ in range(max(1, args.repeat)):
            with tempfile.TemporaryDirectory(prefix="itemeval-real-") as tmp:
                store = str(Path(tmp) / "store")
                started = time.perf_counter()
                result = import_sources(store, [str(folder)])
                best = min(best, time.perf_counter() - started)
                imported = own_scores.imported_scores(store)
        assert result is not None
        own = own_scores.own_scores(tool)
        for key, score in sorted(own.items(), key=lambda kv: [str(k) for k in kv[0]]):
            right, graded, _ = imported.get(key, (0, 0, float("nan")))
            got = right / graded if graded else float("nan")
            same = got == score
            failures += not same
            _, task, model, metric, split = key
            where = task + (f" ({split})" if split else "")
            scores.append(
                f"| {tool} | {where} | {model} | {metric} | {_fmt(score)} | "
                f"{_fmt(got)} ({right}/{graded}) | {'yes' if same else '**no**'} |"
            )
        rejected = sum(result.rejected.values())
        tools.append(
            f"| {tool} | {len(result.files)} | {result.samples:,} | {rejected} | "
            f"{best:.2f} | {result.samples / best:,.0f} |"
        )
    print("| tool | task (split) | model | metric | tool's own | imported | equal |")
    print("| --- | --- | --- | --- | ---: | ---: | --- |")
    print("\n".join(scores))
    print()
    print("| tool | files | samples imported | rejected | seconds | samples/s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    print("\n".join(tools))
    with tempfile.TemporaryDirectory(prefix="itemeval-real-") as tmp:
        store = str(Path(tmp) / "store")
        started = time.perf_counter()
        result = import_sources(store, [str(p) for p in own_scores.log_folders()])
        seconds = time.perf_counter() - started
        conditions = [g for r in read_imports(StudyStore.open(store)) for g in r.generate]
        imported = own_scores.imported_scores(store)
    reported = set().union(*(own_scores.own_scores(t) for t in own_scores.READERS))
    triples = {(tool, task, model) for tool, task, model, _, _ in reported}
    named = {(g.tool, g.task, g.model_id) for g in conditions}
    differ = sum(
        imported[k][0] / imported[k][1] != v
        for t in own_scores.READERS
        for k, v in own_scores.own_scores(t).items()
    )
    print(
        f"\nAll folders at once: {len(result.files)} files, {result.samples:,} samples in "
        f"{seconds:.2f} s, {sum(result.rejected.values())} rejected; {len(conditions)} "
        f"generate conditions for {len(triples)} (tool, task, model) reported; "
        f"{len(reported) - differ} of {len(reported)} scores equal to the tools' own"
    )
    failures += differ + (named != triples) + (len(conditions) != len(triples))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

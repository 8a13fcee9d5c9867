"""Each tool's own scores in the committed logs, read the way the tool reports them (no itemeval
code): what an import must reproduce. Used by tests/importing/test_real_logs.py and
benchmarks/import_real.py.

A score is keyed by `(tool, task, model, metric, split)`: `split` is None except for HELM, whose
`stats.json` reports each split on its own; every other tool reports a task as a whole.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
HELM_CORE = ("exact_match", "quasi_exact_match", "prefix_exact_match", "quasi_prefix_exact_match")
Key = tuple[str, str, str, str, "str | None"]


def _zipfile() -> Any:
    if sys.version_info >= (3, 14):
        import zipfile
    else:
        from backports.zstd import zipfile
    return zipfile


def inspect_scores(root: Path) -> dict[Key, float]:
    """`results.scores[].metrics.accuracy` of each log's header, per scorer."""
    out: dict[Key, float] = {}
    for path in sorted(root.rglob("*")):
        if path.suffix == ".eval":
            with _zipfile().ZipFile(path) as archive:
                header = json.loads(archive.read("header.json"))
        elif path.suffix == ".json":
            header = json.loads(path.read_text())
        else:
            continue
        spec = header["eval"]
        for score in header["results"]["scores"]:
            key = ("inspect_ai", spec["task"], spec["model"], score["name"], None)
            out[key] = float(score["metrics"]["accuracy"]["value"])
    return out


def lm_eval_scores(root: Path) -> dict[Key, float]:
    """`results[task]["<metric>,<filter>"]` of each results file (stderr left out)."""
    out: dict[Key, float] = {}
    for path in sorted(root.rglob("results_*.json")):
        data = json.loads(path.read_text())
        model = data["config"]["model_args"].get("pretrained") or data["config"]["model"]
        for task, metrics in data["results"].items():
            for name, value in metrics.items():
                if "," not in name or "_stderr" in name or not isinstance(value, (int, float)):
                    continue
                metric, filt = name.split(",", 1)
                metric = metric if filt == "none" else name
                out[("lm_eval", task, model, metric, None)] = float(value)
    return out


def helm_scores(root: Path) -> dict[Key, float]:
    """`stats.json`'s mean of each core metric per split (unperturbed)."""
    out: dict[Key, float] = {}
    for path in sorted(root.rglob("stats.json")):
        spec = json.loads((path.parent / "run_spec.json").read_text())
        task = spec["name"].split(":", 1)[0]
        model = spec["adapter_spec"]["model"]
        for stat in json.loads(path.read_text()):
            name = stat["name"]
            if name["name"] in HELM_CORE and "perturbation" not in name and "split" in name:
                key = ("helm", task, model, name["name"], name["split"])
                out[key] = float(stat["mean"])
    return out


def eee_scores(root: Path) -> dict[Key, float]:
    """`evaluation_results[].score_details.score` of each aggregate record with instances; the
    key is the library that ran it, its dataset, model and metric."""
    out: dict[Key, float] = {}
    for path in sorted(root.rglob("*.json")):
        record = json.loads(path.read_text())
        if "evaluation_results" not in record:
            continue
        library = record["eval_library"]["name"]
        for result in record["evaluation_results"]:
            data = result.get("source_data") or {}
            task = data.get("dataset_name") or result["evaluation_name"]
            config = result.get("metric_config") or {}
            metric = (
                config.get("metric_name")
                or config.get("metric_id")
                or result.get("evaluation_result_id")
            )
            key = (library, task, record["model_info"]["id"], str(metric), None)
            out[key] = float(result["score_details"]["score"])
    return out


READERS = {
    "inspect_ai": inspect_scores,
    "lm_eval": lm_eval_scores,
    "helm": helm_scores,
    "every_eval_ever": eee_scores,
}


def own_scores(tool: str) -> dict[Key, float]:
    """The scores of the committed logs of `tool` (a folder of this one)."""
    return READERS[tool](HERE / tool / "logs")


def log_folders() -> list[Path]:
    """Every tool's folder of committed logs."""
    return [HERE / tool / "logs" for tool in READERS if (HERE / tool / "logs").is_dir()]


# -- what a store says ---------------------------------------------------------------------
def imported_scores(store: str) -> dict[Key, tuple[int, int, float]]:
    """Per key, what the store holds after an import: right answers, graded answers, and their
    mean score, from the long table `itemeval export` writes (every grade row, deduplicated).
    ValueError if a row's item is not of its condition's benchmark (rows mixed)."""
    from itemeval import Study
    from itemeval.ids import slugify
    from itemeval.importing import read_imports
    from itemeval.store import StudyStore

    records = read_imports(StudyStore.open(store))
    tasks = {g.id: (g.tool, g.task, g.model_id) for r in records for g in r.generate}
    rows = Study.from_store(store).results().to_pylist()
    tallies: dict[Key, list[float]] = {}
    for row in rows:
        tool, task, model = tasks[row["gen_condition_id"]]
        split = row["dataset"].rsplit(".", 1)[1] if tool == "helm" else None
        benchmark = ".".join(slugify(p) for p in [tool, str(task)] + ([split] if split else []))
        if row["dataset"] != benchmark or not row["item_id"].startswith(benchmark + "~"):
            raise ValueError(f"a row of {benchmark} stored against the item {row['item_id']}")
        key = (tool, str(task), model, row["grader"], split)
        entry = tallies.setdefault(key, [0, 0, 0.0])
        entry[0] += int(bool(row["correct"]))
        entry[1] += 1
        entry[2] += float(row["score"])
    return {k: (int(r), int(n), s / n) for k, (r, n, s) in tallies.items()}

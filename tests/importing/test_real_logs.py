"""`itemeval import` on logs that the real tools wrote (tests/data/real_logs: inspect_ai 0.3.285
and 0.3.140, lm-eval 0.4.13, crfm-helm 0.5.16, and Every Eval Ever records the every-eval-ever
converters made of them; each folder's make.sh holds the commands). Every score is compared
with the tool's own, two tasks with the same sample ids never share a row, damaged files are
named and skipped, and the analyses read the store without a study file."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from itemeval import Study
from itemeval.cli.main import main
from itemeval.datasets.format import read_dataset
from itemeval.errors import ExitCode
from itemeval.importing import import_sources, read_imports, store_plan
from itemeval.store import StudyStore

REAL = Path(__file__).resolve().parents[1] / "data" / "real_logs"
sys.path.insert(0, str(REAL))
import own_scores  # noqa: E402  (the tools' own scores, read as each tool reports them)

INSPECT = REAL / "inspect_ai" / "logs"
ZSTD, DEFLATE = 93, 8


def _import_all(store: Path) -> object:
    return import_sources(str(store), [str(p) for p in own_scores.log_folders()])


@pytest.fixture(scope="module")
def everything(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    store = tmp_path_factory.mktemp("real") / "store"
    return store, _import_all(store)


def test_the_logs_cover_every_compression_inspect_writes():
    zipfile = own_scores._zipfile()
    methods = set()
    for path in INSPECT.rglob("*.eval"):
        with zipfile.ZipFile(path) as archive:
            methods |= {info.compress_type for info in archive.infolist()}
    assert methods == {ZSTD, DEFLATE}
    assert list(INSPECT.rglob("*.json"))  # and inspect's JSON logs


def test_every_score_equals_the_tools_own(everything):
    store, result = everything
    assert result.rejected == {}, result.examples
    imported = own_scores.imported_scores(str(store))
    compared = 0
    for tool in own_scores.READERS:
        for key, score in own_scores.own_scores(tool).items():
            right, graded, mean = imported[key]
            assert right / graded == score and mean == pytest.approx(score, abs=1e-12), key
            compared += 1
    assert compared >= 30
    # nothing imported that no tool reported
    reported = set().union(*(own_scores.own_scores(t) for t in own_scores.READERS))
    assert set(imported) == reported


def test_one_condition_per_tool_task_and_model(everything):
    store, _ = everything
    records = read_imports(StudyStore.open(str(store)))
    conditions = [g for r in records for g in r.generate]
    named = {(g.tool, g.task, g.model_id) for g in conditions}
    assert len(named) == len(conditions) == len({g.slug for g in conditions})
    reported = set().union(*(own_scores.own_scores(t) for t in own_scores.READERS))
    assert named == {(tool, task, model) for tool, task, model, _, _ in reported}
    # status, the report and the viewer show slugs: each names its tool, task and model
    for g in conditions:
        assert g.tool in g.slug and str(g.task).replace("_", "-").lower() in g.slug.replace(
            "_", "-"
        )


def _solutions(store: Path) -> list[dict]:
    """Every solution row as written (no deduplication): physical truth."""
    rows = []
    for fragment in sorted(store.glob("solutions/*/*.parquet")):
        table = pq.read_table(fragment)
        condition = fragment.parent.name.split("=", 1)[1]
        rows += [r | {"condition": condition} for r in table.to_pylist()]
    return rows


def _questions(log: Path) -> dict[str, str]:
    """A JSON log's own sample ids and inputs."""
    data = json.loads(log.read_text())
    return {str(s["id"]): s["input"] for s in data["samples"]}


@pytest.mark.parametrize("order", ["forward", "reverse"])
def test_two_tasks_with_the_same_ids_never_share_a_row(tmp_path: Path, order: str):
    """inspect's multiplication and colours logs number their samples 1..8 and 1..6: each answer
    stays with its own task's item, whatever order the files come in."""
    logs = sorted((INSPECT / "json").glob("*.json"))
    assert len(logs) == 2
    sources = [str(p) for p in (logs if order == "forward" else logs[::-1])]
    store = tmp_path / "store"
    result = import_sources(str(store), sources)
    assert result.rejected == {}
    assert len(result.datasets) == 2 and len(result.generate) == 2
    questions = {}
    for log in logs:
        task = json.loads(log.read_text())["eval"]["task"]
        questions[task] = _questions(log)
    assert set(questions["multiplication"]) & set(questions["colours"])  # overlapping ids
    tasks = {g["id"]: g["task"] for g in result.generate}
    rows = Study.from_store(str(store)).results().to_pylist()
    assert rows
    for row in rows:  # each row's item is its own task's sample, with that sample's input
        task = tasks[row["gen_condition_id"]]
        assert row["dataset"] == f"inspect_ai.{task}"
        source_id = row["item_id"].rpartition("~")[2]
        assert row["input"] == questions[task][source_id], row
    stored = _solutions(store)
    assert len(stored) == len({(r["condition"], r["item_id"], r["epoch"]) for r in stored})
    assert len(stored) == sum(len(q) for q in questions.values())
    for name in result.datasets:
        items = list(read_dataset(str(store / "imported/datasets" / name)).iter_items())
        task = name.split(".", 1)[1]
        assert {i.identifier.split("~", 1)[1] for i in items} == set(questions[task])


def test_a_later_import_of_another_task_never_takes_an_earlier_ones_items(tmp_path: Path):
    store = tmp_path / "store"
    first, second = sorted((INSPECT / "json").glob("*.json"))
    import_sources(str(store), [str(first)])
    result = import_sources(str(store), [str(second)])
    assert result.rejected == {} and len(result.datasets) == 1
    tasks = {g.id: g.task for r in read_imports(StudyStore.open(str(store))) for g in r.generate}
    questions = {json.loads(p.read_text())["eval"]["task"]: _questions(p) for p in (first, second)}
    rows = Study.from_store(str(store)).results().to_pylist()
    answers = {(r["gen_condition_id"], r["item_id"], r["epoch"]) for r in rows}
    assert len(answers) == sum(len(q) for q in questions.values())
    for row in rows:
        task = tasks[row["gen_condition_id"]]
        assert row["input"] == questions[task][row["item_id"].rpartition("~")[2]], row


def test_lm_eval_multiple_choice_is_choice_of_n_with_its_choices(everything):
    store, _ = everything
    items = {
        i.identifier: i
        for i in read_dataset(str(store / "imported/datasets/lm_eval.colours")).iter_items()
    }
    docs = [
        json.loads(line) for line in (REAL / "lm_eval/tasks/colours.jsonl").read_text().splitlines()
    ]
    assert len(items) == len(docs)
    for number, doc in enumerate(docs):
        item = items[f"lm_eval.colours~{number}"]
        assert item.modality.value == "choiceof4"
        assert item.extras["choices"] == doc["choices"]
        assert item.response == "ABCD"[doc["label"]]
    # seven options: choiceof7
    seven = list(read_dataset(str(store / "imported/datasets/lm_eval.next_letter")).iter_items())
    assert {i.modality.value for i in seven} == {"choiceof7"}
    assert all(len(i.extras["choices"]) == 7 and i.response in "ABCDEFG" for i in seven)


def test_helm_splits_stay_splits_and_trials_are_epochs(everything):
    store, _ = everything
    rows = [
        r
        for r in Study.from_store(str(store)).results().to_pylist()
        if r["dataset"].startswith("helm.") and r["grader"] == "exact_match"
    ]
    splits = {r["dataset"].rsplit(".", 1)[1] for r in rows}
    assert splits == {"valid", "test"}
    for dataset in {r["dataset"] for r in rows}:
        mine = [r for r in rows if r["dataset"] == dataset]
        items = {r["item_id"] for r in mine}
        assert {r["epoch"] for r in mine} == {0, 1}  # two trials
        assert len(mine) == 2 * len(items)  # every trial of every instance
    mc = read_dataset(str(store / "imported/datasets/helm.odd_one_out.test")).iter_items()
    assert {i.modality.value for i in mc} == {"choiceof4"}


def test_the_report_pairs_conditions_only_within_one_benchmark(everything):
    store, _ = everything
    study = Study.from_store(str(store))
    datasets: dict[str, set[str]] = {}
    for row in study.results().to_pylist():
        datasets.setdefault(row["gen_condition_id"], set()).add(row["dataset"])
    rows = [
        r
        for r in study.comparisons(resamples=200).comparisons.to_pylist()
        if r["scope"] in ("conditions", "dataset")
    ]
    assert rows
    for row in rows:  # a pair's conditions share a benchmark's items
        assert datasets[row["first_id"]] & datasets[row["second_id"]], row
    # two models on one benchmark are compared, whether their answers came from two logs of
    # one tool or from a raw log and the Every Eval Ever records of another run
    assert any("multiplication" in r["first"] and "multiplication" in r["second"] for r in rows)
    raw, converted = "example-org-dummy-model", "example-org-dummy-model-b"
    assert any(
        r["scope"] == "dataset"
        and r["dataset"] == "lm_eval.colours"
        and {r["first"], r["second"]} == {f"{raw}_colours_lm_eval", f"{converted}_colours_lm_eval"}
        for r in rows
    )
    report = study.report(str(store.parent / "report"), resamples=200)
    text = Path(report.markdown).read_text()
    for line in text.splitlines():
        for pair in line.split("not distinguishable: ", 1)[1:]:
            for names in pair.rstrip(".").split(", "):
                first, _, second = names.partition(" ~ ")
                assert first != second, line


def test_the_analyses_read_an_imported_store_without_a_study(everything, capsys):
    store, _ = everything
    # read without a study file: its 2 conditions with graded answers are counted, and item
    # response theory, which needs 3, is refused (docs/irt.md)
    code = main(["analyze", "irt", "--store", str(store), "--no-write"])
    assert code == ExitCode.BAD_INPUT
    assert "2 condition(s) with graded answers" in capsys.readouterr().err
    assert main(["report", "--store", str(store), "--out", str(store.parent / "r")]) == 0
    assert main(["status", "--store", str(store)]) == ExitCode.OK


def _damaged(folder: Path) -> dict[str, str]:
    """Copies of the real logs with one damage each: file -> the reason it must be named for."""
    shutil.copytree(REAL / "inspect_ai/logs", folder / "inspect")
    shutil.copytree(REAL / "lm_eval/logs", folder / "lm_eval")
    shutil.copytree(REAL / "helm/logs", folder / "helm")
    expected = {}
    zstd = sorted((folder / "inspect/zstd").glob("*.eval"))
    truncated = zstd[0]
    truncated.write_bytes(truncated.read_bytes()[:2000])  # a zip without its directory
    expected[str(truncated)] = "unreadable"
    member = zstd[1]  # one sample's bytes flipped inside the archive
    zipfile = own_scores._zipfile()
    with zipfile.ZipFile(member) as archive:
        info = next(i for i in archive.infolist() if i.filename.startswith("samples/"))
    data = bytearray(member.read_bytes())
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    for at in range(start + 8, start + 40):
        data[at] ^= 0xFF
    member.write_bytes(bytes(data))
    expected[str(member)] = f"unreadable (member {info.filename}"
    log = sorted((folder / "inspect/json").glob("*.json"))[0]
    log.write_text(log.read_text()[:5000])  # truncated JSON log
    expected[str(log)] = "invalid_json"
    results = next((folder / "lm_eval").glob("results_*.json"))
    results.write_text(results.read_text()[:300])  # damaged aggregate: its samples go too
    expected[str(results)] = "invalid_json"
    for samples in (folder / "lm_eval").glob("samples_*.jsonl"):
        expected[str(samples)] = "no_aggregate (its results file"
    state = next((folder / "helm").glob("last_word*")) / "scenario_state.json"
    state.write_text("{garbage")
    expected[str(state)] = "invalid_json"
    return expected


def test_every_damaged_file_is_named_counted_and_skipped(tmp_path: Path, capsys):
    expected = _damaged(tmp_path / "src")
    store = tmp_path / "store"
    code = main(["import", str(tmp_path / "src"), "--store", str(store)])
    captured = capsys.readouterr()
    assert code == ExitCode.OK and "Traceback" not in captured.err + captured.out
    for path, reason in expected.items():  # each named, with what is wrong
        assert f"  {path}: {reason}" in captured.out, (path, reason, captured.out)
    rejected = captured.out.split("Rejected ", 1)[1].splitlines()[0]
    assert rejected.startswith(f"{len(expected)} records: ")  # and counted
    # what was not damaged imported, with the tool's own scores
    imported = own_scores.imported_scores(str(store))
    helm = own_scores.own_scores("helm")
    odd = {k: v for k, v in helm.items() if k[1] == "odd_one_out"}
    assert odd and all(imported[k][0] / imported[k][1] == v for k, v in odd.items())
    assert not any(k[0] == "lm_eval" for k in imported)
    # --strict refuses all of it: exit 6, nothing written
    strict = tmp_path / "strict"
    assert main(["import", str(tmp_path / "src"), "--store", str(strict), "--strict"]) == 6
    assert "Traceback" not in capsys.readouterr().err
    assert not list(strict.glob("solutions/*/*.parquet")) and not (strict / "imports").exists()


def test_a_samples_file_without_its_results_is_rejected_with_that_reason(tmp_path: Path):
    folder = tmp_path / "src"
    shutil.copytree(REAL / "lm_eval/logs", folder)
    next(folder.glob("results_*.json")).unlink()
    result = import_sources(str(tmp_path / "store"), [str(folder)])
    assert result.import_id is None and set(result.rejected) == {"no_aggregate"}
    assert result.rejected["no_aggregate"] == 4
    assert all("no results_" in e for e in result.examples)


def test_runs_that_differ_only_in_settings_are_told_apart(tmp_path: Path):
    """The same task and model run twice, once at a stated temperature: two conditions, whose
    names say the setting that tells them apart (status, the report and the viewer show them)."""
    log = sorted((INSPECT / "json").glob("*colours*.json"))[0]
    data = json.loads(log.read_text())
    data["eval"]["model_generate_config"] = {"temperature": 0.7}
    (tmp_path / "src").mkdir()
    shutil.copy(log, tmp_path / "src" / "plain.json")
    (tmp_path / "src" / "warm.json").write_text(json.dumps(data))
    result = import_sources(str(tmp_path / "store"), [str(tmp_path / "src")])
    assert result.rejected == {} and len(result.generate) == 2 and len(result.datasets) == 1
    slugs = [c.slug for c in store_plan(str(tmp_path / "store")).design.generate]
    assert sorted(slugs) == [
        "mockllm-second_colours_inspect_ai_defaults",
        "mockllm-second_colours_inspect_ai_temperature-0.7",
    ]

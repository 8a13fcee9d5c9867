"""Every reading command says the same, digit for digit, from the partitions' summaries and from
every row (`ITEMEVAL_SUMMARIES=off`): status, plan, report, `analyze irt` and the long table,
on a store whose partitions hold summaries and fragments written after them (a run with more
replications after a compaction of half the partitions, one of them compacted mid-way)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from export_studies import run, write_study

from itemeval.cli.main import main
from itemeval.config import load_study
from itemeval.runtime import RunOptions, run_study
from itemeval.store import GRADES, SOLUTIONS, StudyStore, compact
from itemeval.store._summary import SUMMARIES_ENV

INLINE = RunOptions(no_ray=True, yes=True, quiet=True)


@pytest.fixture(scope="module")
def mixed_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("summaries")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ITEMEVAL_CACHE_DIR", str(folder / "default-cache"))
        first = run(folder, **{"facets.replications": 1})
        store = StudyStore.open(first.store_url)
        generate = store.condition_ids(SOLUTIONS)
        grade = store.condition_ids(GRADES)
        # Summaries of half the partitions; the others have none.
        compact(store, conditions=[*generate[::2], *grade[:1]])
        path = write_study(folder, **{"facets.replications": 2})
        outcome = run_study(load_study(path), INLINE)  # newer fragments beside the summaries
        assert outcome.status == "completed", outcome.message
    return path


@pytest.fixture(scope="module")
def compacted_store(mixed_store: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of that store with every partition compacted: the summaries cover every cell
    (readers place them without reading an id)."""
    folder = tmp_path_factory.mktemp("compacted")
    source = Path(load_study(mixed_store).store_url.removeprefix("file://"))
    shutil.copytree(source, folder / "store")
    data = yaml.safe_load(mixed_store.read_text())
    data["store"] = str(folder / "store")
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    compact(StudyStore.open(str(folder / "store")))
    return path


def _undated(text: str) -> str:
    """The report without the minute it was written."""
    return re.sub(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}( UTC)?", "<when>", text)


def _both(path: Path, argv: list[str], capsys: pytest.CaptureFixture[str], mp) -> list[str]:
    outputs = []
    for setting in ("on", "off"):
        mp.setenv(SUMMARIES_ENV, setting)
        code = main(argv)
        out = capsys.readouterr().out
        # Wall times are the only thing allowed to differ.
        out = re.sub(r"in \d+(\.\d+)? s\b", "in <time> s", out)
        outputs.append(f"exit {code}\n{out}")
    return outputs


@pytest.mark.parametrize(
    "command",
    [
        ["status"],
        ["status", "--json"],
        ["plan"],
        ["analyze", "irt", "--no-write"],
    ],
    ids=["status", "status-json", "plan", "irt"],
)
@pytest.mark.parametrize("layout", ["mixed", "compacted"])
def test_reading_commands_print_the_same_with_and_without_summaries(
    request: pytest.FixtureRequest,
    layout: str,
    command: list[str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch,
) -> None:
    store = request.getfixturevalue(f"{layout}_store")
    with_summaries, every_row = _both(
        store, [*command[:2], str(store), *command[2:]], capsys, monkeypatch
    )
    assert with_summaries == every_row
    assert len(with_summaries.splitlines()) > 5


@pytest.mark.parametrize("layout", ["mixed", "compacted"])
def test_report_and_long_table_are_the_same_with_and_without_summaries(
    request: pytest.FixtureRequest,
    layout: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch,
) -> None:
    mixed_store = request.getfixturevalue(f"{layout}_store")
    written = {}
    for setting in ("on", "off"):
        monkeypatch.setenv(SUMMARIES_ENV, setting)
        out = tmp_path / setting
        assert main(["report", str(mixed_store), "--out", str(out)]) in (0, 1)
        assert main(["export", str(mixed_store), "--out", str(out), "--format", "parquet"]) == 0
        capsys.readouterr()
        written[setting] = (
            _undated((out / "report.md").read_text()),
            _undated((out / "report.html").read_text()),
            pq.read_table(next(out.rglob("*.parquet"))),
        )
    on, off = written["on"], written["off"]
    assert on[0] == off[0]
    assert on[1] == off[1]
    assert on[2].equals(off[2])

"""Every commented-out example in the starter study (`itemeval init`) works as written: each is
uncommented in turn and the study is planned and run (simulated provider, in process)."""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path

import pytest

from itemeval.cli.main import main

REPO = Path(__file__).resolve().parents[2]
STARTER = resources.files("itemeval").joinpath("starter_study.yaml").read_text("utf-8")
# a commented line that is YAML (a key or a list item), not prose
_EXAMPLE_LINE = re.compile(r"^(?P<indent>\s*)# (?P<body>(- )?[A-Za-z_][\w-]*:(\s.*)?$)")
_CONTINUATION = re.compile(r"^(?P<indent>\s*)# (?P<body>\s+\S.*)$")

# Rows in GSM8K's layout, written for this test: {"question", "answer": "... #### N"}
GSM8K_STYLE = [
    {"question": "Ann has 3 apples and buys 4 more. How many now?", "answer": "3 + 4 = 7\n#### 7"},
    {"question": "A box holds 12 eggs. How many in 3 boxes?", "answer": "12 * 3 = 36\n#### 36"},
]


def commented_examples(text: str) -> list[tuple[int, int]]:
    """(first, last) line numbers of each commented-out example block."""
    lines = text.splitlines()
    blocks: list[tuple[int, int]] = []
    index = 0
    while index < len(lines):
        match = _EXAMPLE_LINE.match(lines[index])
        if not match:
            index += 1
            continue
        start, indent = index, match["indent"]
        index += 1
        while index < len(lines):
            more = _CONTINUATION.match(lines[index])
            if not more or more["indent"] != indent:
                break
            index += 1
        blocks.append((start, index - 1))
    return blocks


def uncomment(text: str, block: tuple[int, int]) -> str:
    lines = text.splitlines()
    for number in range(block[0], block[1] + 1):
        lines[number] = re.sub(r"^(\s*)# ", r"\1", lines[number], count=1)
    return "\n".join(lines) + "\n"


EXAMPLES = commented_examples(STARTER)
FIRST_LINES = [STARTER.splitlines()[first].split("#", 1)[1].strip() for first, _ in EXAMPLES]
NAMES = [line.split("#")[0].strip().removeprefix("- ").replace(": ", "-") for line in FIRST_LINES]


def test_the_starter_has_the_examples_we_expect():
    """The scan finds every example (and no prose), so the test below covers them all."""
    assert NAMES == [
        "store-./studies/my-study",
        "name-gsm8k",
        "openai:",
        "scorer-[auto]",
        "panels:",
        "gold:",
        "analysis:",
        "study_max_usd-200",
        "location-~/.cache/itemeval",
    ]
    assert EXAMPLES[1][1] - EXAMPLES[1][0] == 7  # the whole gsm8k dataset entry


@pytest.mark.parametrize("block", EXAMPLES, ids=NAMES)
def test_each_commented_example_works_uncommented(block, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # `~/.cache/itemeval` lands here
    data = tmp_path / "data" / "gsm8k" / "test.jsonl"
    data.parent.mkdir(parents=True)
    data.write_text("".join(json.dumps(row) + "\n" for row in GSM8K_STYLE))
    assert main(["init", "study.yaml"]) == 0
    study = tmp_path / "study.yaml"
    text = uncomment(study.read_text(), block)
    assert text != study.read_text()
    study.write_text(text)

    assert main(["plan", "study.yaml"]) == 0, capsys.readouterr().err
    assert main(["run", "study.yaml", "--no-ray", "--yes", "--quiet"]) == 0
    out = capsys.readouterr().out
    if "gsm8k" in FIRST_LINES[EXAMPLES.index(block)]:
        assert "arithmetic 20/33, gsm8k 2/2" in out  # the mapped file was read


def test_init_writes_the_dataset_it_names_beside_the_study(tmp_path, monkeypatch, capsys):
    """In an empty folder, `init` then `plan` works: the sample dataset is written beside the
    new file (the same items as the repository's), and files already there are left alone."""
    monkeypatch.chdir(tmp_path)
    assert main(["init", "sub/study.yaml"]) == 0
    assert "sub/datasets/arithmetic/" in capsys.readouterr().out
    written = sorted(p.name for p in (tmp_path / "sub/datasets/arithmetic").iterdir())
    shipped = REPO / "configs" / "datasets" / "arithmetic"
    assert written == sorted(p.name for p in shipped.iterdir())
    for name in written:
        assert (tmp_path / "sub/datasets/arithmetic" / name).read_bytes() == (
            shipped / name
        ).read_bytes()
    assert main(["plan", "sub/study.yaml"]) == 0, capsys.readouterr().err
    assert "arithmetic 20/33" in capsys.readouterr().out
    mine = tmp_path / "sub/datasets/arithmetic/arithmetic.jsonl"
    mine.write_text("my own items\n")
    assert main(["init", "sub/study.yaml", "--force"]) == 0
    assert mine.read_text() == "my own items\n"


def test_the_starter_shows_panels_gold_and_analysis_commented():
    for key in ("# panels:", "# gold:", "# analysis:", "#     threshold: 0.5", "#   cluster_by:"):
        assert key in STARTER, key

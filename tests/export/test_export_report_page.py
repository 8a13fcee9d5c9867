"""report.html shows the markup that items and answers hold as text: the templates escape every
value (`itemeval/report/_templates.py`), and nothing from the store is marked safe."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from export_studies import DEMO, run

from itemeval.report import write_report

SCRIPT = "<script>alert('item')</script>"
IMAGE = "<img src=x onerror=alert('answer')>"


def test_report_html_shows_item_and_answer_markup_as_text(tmp_path: Path) -> None:
    folder = tmp_path / "data" / "unsafe"
    folder.mkdir(parents=True)
    rows = [
        {"identifier": f"unsafe.{i}", "modality": "single-value", "prompt": p, "response": r}
        for i, (p, r) in enumerate(
            [(f"What is 2 + 2? {SCRIPT}", IMAGE), ("Say it back.", "2 <b>bold</b>")]
        )
    ]
    (folder / "unsafe.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "unsafe.yaml").write_text(
        "identifier: unsafe\ntitle: Unsafe\nmetadataVersion: '3.3'\nhasPart:\n- unsafe.jsonl\n"
    )
    data = yaml.safe_load(yaml.safe_dump(DEMO))
    data["datasets"] = [{"name": "unsafe", "path": str(folder)}]
    data["facets"]["grader"], data["graders"] = [], {}
    data["facets"].pop("rubric")
    data["endpoints"]["sim"]["sim"] = {}
    result = run(tmp_path / "study", data)
    write_report(result.plan(), str(tmp_path / "out"))
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert "<script" not in page and "<img" not in page and "<b>bold" not in page
    assert "&lt;script&gt;alert(&#x27;item&#x27;)&lt;/script&gt;" in page  # shown, as text
    assert "&lt;b&gt;bold&lt;/b&gt;" in page

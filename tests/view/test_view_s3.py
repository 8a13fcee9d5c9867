"""The viewer over a store on S3 (moto on 127.0.0.1): the index comes through the store's
readers, and an item page's texts through pyarrow (DuckDB would need an extension from the
internet). One model, one prompt, one epoch of one dataset
keep it short."""

from __future__ import annotations

import html
import urllib.request
from pathlib import Path

import pytest
from export_studies import DATASETS, run

from itemeval.config import load_study
from itemeval.planning import make_plan
from itemeval.view import ViewOptions, ViewServer


@pytest.mark.s3
def test_viewer_reads_a_store_on_s3(
    s3_bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ITEMEVAL_CACHE_DIR", str(tmp_path / "default-cache"))
    result = run(
        tmp_path,
        store=f"{s3_bucket}/demo",
        datasets=[{"name": "science-mc", "path": str(DATASETS / "science-mc")}],
        models=[{"id": "sim/strong", "endpoint": "sim", "name": "strong"}],
        **{"facets.replications": 1, "facets.prompt": ["builtin:direct"]},
    )
    assert result.outcome.status == "completed"
    plan = make_plan(load_study(result.study_path), with_pending=False)
    stored = plan.store.read_solutions(None, ["item_id", "text"]).to_pylist()
    item_id = stored[0]["item_id"]
    texts = {r["text"] for r in stored if r["item_id"] == item_id}
    server = ViewServer(plan, ViewOptions(port=0, open_browser=False, refresh_s=0))
    url = server.start()
    try:
        with urllib.request.urlopen(f"{url}item?id={item_id}", timeout=30) as response:
            page = html.unescape(response.read().decode())
        with urllib.request.urlopen(url, timeout=30) as response:
            overview = response.read().decode()
    finally:
        server.stop()
    assert texts and all(text in page for text in texts)
    assert 'id="leaderboard"' in overview and overview.count("<tr>") >= 2

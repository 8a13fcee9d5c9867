"""The journal's bound itself: a paid answer waits at most 0.5 s in memory before its write to
the response cache starts, and is then readable there by another reader.

Answers arrive one by one every 0.1 s for two seconds, so no shard's flush helps and rows
arrive while writes are going on. The cache is the real one on disk, with each write's start and
end noted at its boundary; another `ResponseCache` on the same folder (as another process would
open it) polls for every answer's key. The bound is the documented one (docs/architecture.md,
"within 0.5 s"), not the module's constant, so a slower journal fails here.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from itemeval.calls import ResponseJournal
from itemeval.store import ResponseCache, cache_group, cache_key

BOUND_S = 0.5
#: The event loop's own lateness on a busy machine (a timer fires, a thread starts).
LATE_S = 0.1
#: What the poller adds: its period and its listing.
POLL_S = 0.25
GROUP = cache_group("sim/model-a", {"temperature": 0.0}, "template-sha")


def _row(i: int) -> dict:
    request = f"{i:064x}"
    return {
        "key": cache_key(request, 0),
        "item_id": f"q{i}",
        "epoch": 0,
        "request_hash": request,
        "model": "sim/model-a",
        "text": f"answer {i}",
        "input_tokens": 12,
        "output_tokens": 3,
        "usd": 0.002,
        "latency_ms": 250.0,
    }


class NotedCache:
    """The real cache; when each write of a key started and ended."""

    def __init__(self, cache: ResponseCache):
        self.cache = cache
        self.started: dict[str, float] = {}
        self.ended: dict[str, float] = {}

    def put(self, group: str, rows: list[dict[str, Any]]) -> Any:
        started = time.monotonic()
        out = self.cache.put(group, rows)
        ended = time.monotonic()
        for row in rows:
            self.started[row["key"]], self.ended[row["key"]] = started, ended
        return out


@pytest.mark.serial  # half a second of the wall clock
def test_every_answer_starts_its_write_within_half_a_second(tmp_path):
    url = str(tmp_path / "cache")
    rows = [_row(i) for i in range(20)]
    keys = [row["key"] for row in rows]
    added: dict[str, float] = {}
    seen: dict[str, float] = {}
    done = threading.Event()
    cache = NotedCache(ResponseCache.open(url))

    def watch() -> None:  # another reader of the cache, listing afresh each time
        reader = ResponseCache.open(url)
        while len(seen) < len(keys) and not done.is_set():
            found = reader.lookup(GROUP, keys, fresh=True).column("key").to_pylist()
            now = time.monotonic()
            for key in found:
                seen.setdefault(key, now)
            time.sleep(0.01)

    async def answers() -> None:
        journal = ResponseJournal(cache)  # type: ignore[arg-type]
        for row in rows:
            added[row["key"]] = time.monotonic()
            journal.add(GROUP, row)
            await asyncio.sleep(0.1)
        deadline = time.monotonic() + 10
        while journal.written < len(rows) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await journal.aclose()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        asyncio.run(answers())
        watcher.join(timeout=10)
    finally:
        done.set()
    waited = {key: cache.started[key] - added[key] for key in keys}
    assert max(waited.values()) <= BOUND_S + LATE_S, waited
    # Physical truth: every answer is readable by another reader once its write has ended.
    assert set(seen) == set(keys)
    assert all(seen[key] <= cache.ended[key] + POLL_S for key in keys)

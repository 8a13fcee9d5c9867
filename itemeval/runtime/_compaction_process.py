"""A compaction's own process (`_compaction.py` starts it): compacts partitions one after
another and reports each as it is done.

    python -m itemeval.runtime._compaction_process < {"store": URL, "options": {...},
                                                      "partitions": [[table, id], ...]}

One JSON line on stdout per partition: `{"key": [table, id], "results": [...]}` (each a
`store.CompactionResult`) or `{"key": ..., "error": "why"}` (a warning for the run: the rows
are untouched). SIGTERM asks it to stop at its next batch of fragments (what it wrote of the
partition is removed); Ctrl-C is the run's to handle, so it is ignored here. A process of its
own, not a fork of the driver: a run started by a script re-imports nothing, and the memory a
compaction used goes back to the system when it ends.
"""

from __future__ import annotations

import dataclasses
import json
import signal
import sys
import threading
from typing import Any


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    from itemeval._util.arrow_start import skip_pandas_probe

    skip_pandas_probe()
    from itemeval.secrets import redact
    from itemeval.store import StudyStore, compact

    job = json.load(sys.stdin)
    store = StudyStore.open(job["store"], job.get("options"))
    for table, condition_id in job["partitions"]:
        if stop.is_set():
            break
        line: dict[str, Any] = {"key": [table, condition_id]}
        try:
            results = compact(store, [table], [condition_id], stop=stop.is_set)
            line["results"] = [dataclasses.asdict(r) for r in results]
        except Exception as exc:  # reported: the run says it and goes on
            line["error"] = redact(f"{type(exc).__name__}: {exc}").splitlines()[0][:300]
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()

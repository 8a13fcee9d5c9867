"""A driver-like writer process for the concurrency and crash tests (not collected by pytest).

It computes the pending generate cells of a store, then writes them in chunks, one fragment
per chunk, printing `fragment <n> <rows>` after each write so the test can time a SIGKILL.

    python store_writer.py ROOT --conditions c1,c2 --items 100 --epochs 2 --chunk 25 --run-id r
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time

import pyarrow as pa

from itemeval.store import StudyStore, pending_generate


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("root")
    parser.add_argument("--conditions", required=True)
    parser.add_argument("--items", type=int, required=True)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--chunk", type=int, default=25)
    parser.add_argument("--run-id", default="writer")
    parser.add_argument("--text-bytes", type=int, default=40)
    parser.add_argument("--pause", type=float, default=0.0)
    args = parser.parse_args()

    store = StudyStore.open(args.root)
    items = pa.array([f"item-{i:05d}" for i in range(args.items)])
    pending = pending_generate(store, args.conditions.split(","), items, args.epochs)
    print(f"pending {pending.num_rows}", flush=True)
    written = 0
    for cid in args.conditions.split(","):
        mine = pending.cells(cid)
        for start in range(0, mine.num_rows, args.chunk):
            chunk = mine.slice(start, args.chunk).to_pylist()
            rows = [
                {
                    "item_id": cell["item_id"],
                    "epoch": cell["epoch"],
                    "status": "ok",
                    "text": _text(cid, cell, args.text_bytes),
                    "request_hash": f"req-{cell['item_id']}-{cell['epoch']}",
                    "model": "sim/model-a",
                    "run_id": args.run_id,
                    "output_tokens": 7,
                }
                for cell in chunk
            ]
            store.write_solutions(cid, rows)
            written += 1
            print(f"fragment {written} {len(rows)}", flush=True)
            if args.pause:
                time.sleep(args.pause)
    print("done", flush=True)
    return 0


def _text(condition_id: str, cell: dict, size: int) -> str:
    seed = f"{condition_id}/{cell['item_id']}/{cell['epoch']}".encode()
    out = b""
    while len(out) < size:
        seed = hashlib.sha256(seed).digest()
        out += seed
    return out.hex()[:size]


if __name__ == "__main__":
    sys.exit(main())

"""Parquet encodings of a run's own fragments: dictionary pages or plain, both zstd.

    .venv/bin/python benchmarks/fragment_encoding.py [--items 20000] [--repeats 20]

Runs `itemeval run` (generate + the `auto` scorer, the in-process simulator, no HTTP) over
`--items` generated items into a fresh store and cache, then takes the fragments it wrote: the
response cache's (the journal's), the solutions and the grades. For one fragment of each (the
middle one in name order) and for each whole partition (its fragments concatenated, what a
compaction writes), it encodes the table with `store.fragments.encode_fragment` (plain) and as
fragments were encoded before (pyarrow's default: dictionary pages; zstd both), and prints the
CPU of the encode (best of `--repeats`), the bytes, and the CPU of reading it back: every
column, and the keys alone (item, epoch, status: what a resumed run reads of each fragment).
"""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from generated_data import write_dataset  # noqa: E402
from whole_command import command_env, write_study  # noqa: E402

from itemeval.store.fragments import ROW_GROUP_ROWS, encode_fragment  # noqa: E402

#: What a resumed run reads of every fragment (`without_stored`, the pending set); the cache
#: has no status.
KEY_COLUMNS = ["item_id", "epoch", "status"]


def best_cpu_s(action, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        action()
        best = min(best, time.process_time() - start)
    return best


def encode(table: pa.Table, dictionary: bool) -> bytes:
    """The store's encoding (plain), or the one fragments had before (dictionary pages)."""
    if not dictionary:
        return encode_fragment(table)
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd", row_group_size=ROW_GROUP_ROWS)
    return sink.getvalue()


def run_study(folder: Path, items: int) -> None:
    write_dataset(folder / "bench", items, kind="unique")
    path = write_study(folder, "http://127.0.0.1:9", 256)
    study = yaml.safe_load(path.read_text())
    del study["endpoints"]["sim"]["base_url"]  # the in-process simulator: no server needed
    path.write_text(yaml.safe_dump(study))
    command = [sys.executable, "-m", "itemeval", "run", str(path), "--yes", "--quiet"]
    done = subprocess.run(command, env=command_env(str(folder)), capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"itemeval run failed ({done.returncode}):\n{done.stderr[-3000:]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="itemeval-encoding-") as tmp:
        folder = Path(tmp)
        run_study(folder, args.items)
        kinds = {
            "response cache": folder / "cache" / "calls",
            "solutions": folder / "store" / "solutions",
            "grades": folder / "store" / "grades",
        }
        print(f"{args.items:,} items, one model; CPU of one encode (best of {args.repeats})")
        print(
            f"{'table':<30} {'rows':>7} {'pages':>10} {'encode ms':>10} {'bytes':>10} "
            f"{'read ms':>8} {'keys ms':>8}"
        )
        for kind, root in kinds.items():
            files = sorted(root.glob("*/*.parquet"))
            whole = pa.concat_tables([pq.read_table(f) for f in files])
            one = pq.read_table(files[len(files) // 2])
            tables = ((f"{kind}, one fragment", one), (f"{kind}, all {len(files)}", whole))
            for label, table in tables:
                for dictionary in (True, False):
                    data = encode(table, dictionary)
                    cpu = best_cpu_s(lambda t=table, d=dictionary: encode(t, d), args.repeats)
                    read = best_cpu_s(lambda b=data: pq.read_table(io.BytesIO(b)), args.repeats)
                    columns = [c for c in KEY_COLUMNS if c in table.column_names]
                    keys = best_cpu_s(
                        lambda b=data, c=columns: pq.read_table(io.BytesIO(b), columns=c),
                        args.repeats,
                    )
                    pages = "dictionary" if dictionary else "plain"
                    print(
                        f"{label:<30} {table.num_rows:>7,} {pages:>10} {cpu * 1000:>10.2f} "
                        f"{len(data):>10,} {read * 1000:>8.2f} {keys * 1000:>8.2f}"
                    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

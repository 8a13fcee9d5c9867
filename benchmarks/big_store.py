"""Commands a user re-runs, over stores of 1M to 20M rows, beside DuckDB's scan of the same files.

    .venv/bin/python benchmarks/big_store.py --rows 1000000                 # ~5 minutes
    .venv/bin/python benchmarks/big_store.py --rows 1000000 10000000 20000000 --dir /tmp/big

A store of N rows is N / 8 items x 4 simulated models (`sim/strong`, `sim/medium`, `sim/weak`,
`sim/reasoner`, the in-process simulator) x 2 stages (a solution and an `auto` grade each), made
by `itemeval run` itself. Each command then runs as a user runs it, a subprocess timed from start
to exit, with the peak resident set of every process it starts (sampled from /proc every 50 ms)
and the CPU it used (user + system, of it and what it waited for):

* `status` twice: the first call computes the report's numbers it shows and keeps them
  (`<store>/analysis/status.json`, removed before it), the second reads them;
* `plan`, a no-op re-run (`run --yes`: nothing is pending), `report`, `analyze irt`,
  `export` (the long table) and the viewer's first page (`view`, then a GET of `/` until it
  answers), twice: the first start after a change (`<store>/analysis/view.json` removed before
  it) renders the overview and keeps it, the second (`view again`) answers from the kept page;
* an export after 1% more rows (a second dataset of N / 800 items, added to the study and run),
  against the first export's time;
* DuckDB over the same files, in the same run: a `group by` of the solutions and a `count(*)` of
  the grades (`read_parquet` with hive partitioning), in a subprocess like the rest.

Each figure: wall seconds (`s`), the peak of the tree's summed RSS (`mb`), its CPU (`cpu_s`, as
above), the command's own process's peak (`driver_mb`: for the build,
the run's driver) and the largest processes by their own peaks, and the load average. The build
of a store (`itemeval run` from empty) is reported as `build`. `--plot FILE` draws wall time
against rows, a line per command (also from earlier `--json` files: `--from-json A B --plot F`).

`--dir` keeps the stores (a store already made there is measured again, not rebuilt).
`--commands` picks the commands. Results go to stdout and, with `--json FILE`, to a file.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from generated_data import write_dataset  # noqa: E402
from whole_command import Tree, command_env  # noqa: E402

MODELS = ("strong", "medium", "weak", "reasoner")
ROWS_PER_ITEM = 2 * len(MODELS)
COMMANDS = ("duckdb", "status", "plan", "rerun", "report", "irt", "view", "export", "export+1%")

DUCKDB_SCAN = """
import sys, duckdb
root = sys.argv[1]
con = duckdb.connect()
con.execute("SET threads = 2")
con.sql(f\"\"\"SELECT condition_id, status, count(*), sum(usd), sum(input_tokens)
  FROM read_parquet('{root}/solutions/*/*.parquet', hive_partitioning = true)
  GROUP BY ALL\"\"\").fetchall()
con.sql(f\"\"\"SELECT count(*) FROM read_parquet('{root}/grades/*/*.parquet',
  hive_partitioning = true)\"\"\").fetchall()
"""


def write_study(folder: Path, extra_dataset: bool = False) -> Path:
    datasets = [{"name": "big", "path": str(folder / "big")}]
    if extra_dataset:
        datasets.append({"name": "more", "path": str(folder / "more")})
    study = {
        "study": "big",
        "store": str(folder / "store"),
        "datasets": datasets,
        "endpoints": {"sim": {"kind": "sim", "max_concurrency": 1024}},
        "models": [{"id": f"sim/{m}", "endpoint": "sim"} for m in MODELS],
        "facets": {"scorer": ["auto"]},
        "cache": {"location": str(folder / "cache")},
        "budget": {"policy": "full"},
    }
    path = folder / ("study-more.yaml" if extra_dataset else "study.yaml")
    path.write_text(yaml.safe_dump(study))
    return path


def timed(command: list[str], cwd: Path, marker: str, *, until: Any = None) -> dict[str, Any]:
    """Run `command`; wall time to exit (or until `until()` returns true, then stop it) and the
    peak RSS of its process tree."""
    env = command_env(marker)
    before = frozenset(int(e) for e in os.listdir("/proc") if e.isdigit())
    spent = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    tree = Tree(proc.pid, marker=marker, foreign=before)
    tree.start()
    if until is None:
        out, err = proc.communicate(timeout=4 * 3600)
    else:
        while not until():
            if proc.poll() is not None:
                raise SystemExit(f"{command} exited early: {proc.stderr.read()[-2000:]}")
            time.sleep(0.02)
        proc.terminate()
        out, err = proc.communicate(timeout=60)
    wall = time.perf_counter() - started
    tree.stop()
    # CPU of the command and what it waited for (user + system): the figure the load moves least.
    now = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (now.ru_utime - spent.ru_utime) + (now.ru_stime - spent.ru_stime)
    if until is None and proc.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({proc.returncode}):\n{err[-3000:]}")
    # The largest processes by their own peak: the command's own (the driver) and Ray's.
    largest = sorted(tree.peak_by_pid.items(), key=lambda kv: -kv[1])[:6]
    return {
        "s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "mb": round(tree.peak_rss / 2**20),
        "driver_mb": round(tree.peak_driver_rss / 2**20),
        "largest_mb": [[tree.names.get(pid, "?"), round(rss / 2**20)] for pid, rss in largest],
        "load": round(os.getloadavg()[0], 1),
        "out": out[-2000:],
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def page_answers(url: str) -> Any:
    def check() -> bool:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return bool(response.status == 200 and response.read())
        except OSError:
            return False

    return check


def build(folder: Path, items: int) -> dict[str, Any] | None:
    """The store of `items` items, made by `itemeval run` (None when `folder` holds it)."""
    done = folder / "built.json"
    if done.exists():
        return None
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    write_dataset(folder / "big", items, kind="mixed")
    study = write_study(folder)
    it = [sys.executable, "-m", "itemeval"]
    made = timed([*it, "run", str(study), "--yes", "--quiet"], folder, str(folder))
    done.write_text(json.dumps(made))
    return made


def measure(folder: Path, items: int, commands: list[str]) -> dict[str, Any]:
    it = [sys.executable, "-m", "itemeval"]
    # Once the 1% more rows are stored, the study with both datasets is the store's study.
    more = folder / "more"
    study = write_study(folder, extra_dataset=True) if more.exists() else folder / "study.yaml"
    marker = str(folder)
    out: dict[str, Any] = {}
    store = folder / "store"
    fragments = sum(1 for _ in store.glob("*/*/*.parquet"))
    out["fragments"] = fragments
    for name in commands:
        if name == "duckdb":
            out[name] = timed([sys.executable, "-c", DUCKDB_SCAN, str(store)], folder, marker)
        elif name == "status":
            # The first call after a change computes the report's numbers and keeps them
            # (`<store>/analysis/status.json`); the calls after it read them.
            (store / "analysis" / "status.json").unlink(missing_ok=True)
            out[name] = timed([*it, "status", str(study)], folder, marker)
            out["status again"] = timed([*it, "status", str(study)], folder, marker)
        elif name == "plan":
            out[name] = timed([*it, "plan", str(study)], folder, marker)
        elif name == "rerun":
            out[name] = timed([*it, "run", str(study), "--yes", "--quiet"], folder, marker)
        elif name == "report":
            out[name] = timed(
                [*it, "report", str(study), "--out", str(folder / "report")], folder, marker
            )
        elif name == "irt":
            out[name] = timed([*it, "analyze", "irt", str(study), "--no-write"], folder, marker)
        elif name == "export":
            shutil.rmtree(folder / "export", ignore_errors=True)
            out[name] = timed(
                [*it, "export", str(study), "--out", str(folder / "export")], folder, marker
            )
        elif name == "view":
            # The first start after a change renders the overview and keeps it
            # (`<store>/analysis/view.json`); a start after it answers from the kept page.
            (store / "analysis" / "view.json").unlink(missing_ok=True)
            for key in (name, "view again"):
                port = free_port()
                out[key] = timed(
                    [*it, "view", str(study), "--port", str(port), "--no-open"],
                    folder,
                    marker,
                    until=page_answers(f"http://127.0.0.1:{port}/"),
                )
        elif name == "export+1%":
            if not more.exists():
                write_dataset(more, max(items // 100, 1), kind="mixed")
            bigger = write_study(folder, extra_dataset=True)
            out["run+1%"] = timed([*it, "run", str(bigger), "--yes", "--quiet"], folder, marker)
            out[name] = timed(
                [*it, "export", str(bigger), "--out", str(folder / "export")], folder, marker
            )
    return out


#: `build`: the `itemeval run` that made the store (from empty).
PLOTTED = ("build", "duckdb", "status", "status again", *COMMANDS[2:], "view again")


def plot(results: dict[str, Any], path: Path) -> None:
    """Wall time against rows, a line per command, both axes logarithmic (an SVG)."""
    import math

    sizes = sorted(int(rows) for rows in results)
    lines = {
        name: [
            (rows, results[str(rows)][name]["s"]) for rows in sizes if name in results[str(rows)]
        ]
        for name in PLOTTED
    }
    lines = {name: points for name, points in lines.items() if points}
    width, height, left, right, top, bottom = 760, 420, 70, 150, 40, 50
    x_lo, x_hi = math.log10(min(sizes)) - 0.1, math.log10(max(sizes)) + 0.1
    values = [s for points in lines.values() for _, s in points if s > 0]
    y_lo = math.floor(math.log10(min(values))) if values else -1
    y_hi = math.ceil(math.log10(max(values))) if values else 3

    def px(rows: float) -> float:
        return left + (math.log10(rows) - x_lo) / (x_hi - x_lo) * (width - left - right)

    def py(seconds: float) -> float:
        value = math.log10(max(seconds, 10.0**y_lo))
        return top + (y_hi - value) / (y_hi - y_lo) * (height - top - bottom)

    colours = [
        "#1f77b4",
        "#ff7f0e",
        "#2ca02c",
        "#d62728",
        "#9467bd",
        "#8c564b",
        "#e377c2",
        "#7f7f7f",
        "#bcbd22",
        "#17becf",
        "#393b79",
    ]
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="12">',
        f'<text x="{left}" y="22" font-size="14">Wall time against rows (log-log)</text>',
    ]
    for power in range(y_lo, y_hi + 1):
        y = py(10.0**power)
        out.append(
            f'<line x1="{left}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}" stroke="#ddd"/>'
        )
        out.append(
            f'<text x="{left - 8}" y="{y + 4:.1f}" text-anchor="end">{10.0**power:g} s</text>'
        )
    for rows in sizes:
        x = px(rows)
        out.append(
            f'<text x="{x:.1f}" y="{height - bottom + 18}" text-anchor="middle">'
            f"{rows / 1e6:g}M rows</text>"
        )
    for k, (name, points) in enumerate(lines.items()):
        colour = colours[k % len(colours)]
        path_points = " ".join(f"{px(r):.1f},{py(s):.1f}" for r, s in points)
        out.append(
            f'<polyline points="{path_points}" fill="none" stroke="{colour}" stroke-width="2"/>'
        )
        for r, s in points:
            out.append(f'<circle cx="{px(r):.1f}" cy="{py(s):.1f}" r="3" fill="{colour}"/>')
        y = top + 16 * k
        out.append(
            f'<rect x="{width - right + 12}" y="{y}" width="10" height="10" fill="{colour}"/>'
        )
        out.append(f'<text x="{width - right + 28}" y="{y + 9}">{name}</text>')
    out.append("</svg>")
    path.write_text("\n".join(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000])
    parser.add_argument("--dir", type=Path, help="keep the stores here (reused when present)")
    parser.add_argument("--commands", nargs="+", default=list(COMMANDS), choices=COMMANDS)
    parser.add_argument("--json", type=Path, help="write the figures here too")
    parser.add_argument("--plot", type=Path, help="an SVG of wall time against rows")
    parser.add_argument(
        "--from-json",
        type=Path,
        nargs="+",
        help="plot these earlier --json files (merged) instead of measuring",
    )
    args = parser.parse_args()
    if args.from_json:
        merged: dict[str, Any] = {}
        for source in args.from_json:
            for rows, figures in json.loads(source.read_text()).items():
                merged.setdefault(rows, {}).update(figures)
        if args.plot:
            plot(merged, args.plot)
        return
    keep = args.dir
    tmp = None
    if keep is None:
        tmp = tempfile.TemporaryDirectory(prefix="itemeval-big-")
        keep = Path(tmp.name)
    results: dict[str, Any] = {}
    try:
        for rows in args.rows:
            items = rows // ROWS_PER_ITEM
            folder = keep / f"rows-{rows}"
            made = build(folder, items)
            figures = measure(folder, items, args.commands)
            if made is None:  # the store was there: its build's figures, as recorded then
                made = json.loads((folder / "built.json").read_text())
            if made.get("s") is not None:
                figures["build"] = made
            results[str(rows)] = figures
            load = os.getloadavg()[0]
            print(
                f"{rows:,} rows ({items:,} items x {len(MODELS)} models x 2 stages), "
                f"{figures['fragments']:,} fragments, load {load:.1f}"
            )
            for name, value in figures.items():
                if isinstance(value, dict):
                    print(
                        f"  {name:>12}: {value['s']:8.2f} s  {value.get('cpu_s', 0):7.2f} s CPU"
                        f"  {value['mb']:6,} MB (own {value.get('driver_mb', 0):,})"
                        f"  load {value.get('load', 0):.1f}"
                    )
            if args.json:
                args.json.write_text(json.dumps(results, indent=1))
            if args.plot:
                plot(results, args.plot)
    finally:
        if tmp is not None:
            tmp.cleanup()


if __name__ == "__main__":
    main()

"""How fast the comparisons are at scale: 20 conditions (190 pairs) over 1,000,000 grades.

    .venv/bin/python benchmarks/stat_speed.py [--conditions 20] [--grades 1000000]
        [--epochs 1] [--datasets 2] [--resamples 2000] [--under-way]

Builds the report's in-memory cells (`StudyCells`: one row per grade, integer codes) for a
design of `--conditions` generate conditions (5 models x conditions/5 prompts) under one scorer,
over items split into `--datasets` datasets, then times what the report computes from them
(`statistics.families.study_statistics`: the conditions' family, the models' family and each
dataset's, variance components) and the three tables `export` writes. Prints wall and CPU
seconds and the process's peak resident memory.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from itemeval.results import DesignFacets, GenerateFacets, GradeFacets, StudyCells  # noqa: E402
from itemeval.statistics import (  # noqa: E402
    Options,
    comparisons_table,
    components_table,
    rankings_table,
    study_statistics,
)


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def synthetic_cells(
    conditions: int, grades: int, epochs: int, datasets: int, under_way: bool = False
) -> StudyCells:
    rng = np.random.default_rng(0)
    items = grades // (conditions * epochs)
    models = 5
    prompts = max(1, conditions // models)
    generate = tuple(
        GenerateFacets(
            id=f"m{m}_p{p}--{m:06d}{p:06d}",
            slug=f"m{m}_p{p}",
            model=f"sim/m{m}",
            model_name=f"m{m}",
            prompt=f"p{p}",
            model_config="default",
            params="{}",
            endpoint="sim",
        )
        for m in range(models)
        for p in range(prompts)
    )[:conditions]
    grade = (GradeFacets("auto--000000000000", "auto", "scorer", "auto", None, None, None, None),)
    facets = DesignFacets(generate=generate, grade=grade, epochs=epochs)
    difficulty = rng.uniform(0, 1, items)
    ability = np.linspace(0.5, 0.7, conditions)
    gen = np.repeat(np.arange(conditions, dtype=np.int32), items * epochs)
    item = np.tile(np.repeat(np.arange(items, dtype=np.int32), epochs), conditions)
    epoch = np.tile(np.arange(epochs, dtype=np.int32), items * conditions)
    p = 1 / (1 + np.exp(-8 * (ability[gen] - difficulty[item])))
    correct = rng.uniform(size=len(p)) < p
    dataset = (item % datasets).astype(np.int32)
    if under_way:  # a study under way: condition j has graded its first 50-100% of the items
        done = (items * (0.5 + 0.5 * np.arange(conditions) / max(1, conditions - 1))).astype(int)
        keep = item < done[gen]
        gen, item, epoch, correct, dataset = (a[keep] for a in (gen, item, epoch, correct, dataset))
    n = len(gen)
    table = pa.table(
        {
            "grade": pa.array(np.zeros(n, dtype=np.int32)),
            "gen": pa.array(gen),
            "item": pa.array(item),
            "dataset": pa.array(dataset),
            "epoch": pa.array(epoch),
            "score": pa.array(correct.astype(np.float64)),
            "correct": pa.array(correct),
            "valid": pa.array(np.ones(n, dtype=bool)),
        }
    )
    ids = pa.array([f"item-{i}" for i in range(items)])
    names = [f"d{d}" for d in range(datasets)]
    item_table = pa.table(
        {"item_id": ids, "dataset": pa.array([names[i % datasets] for i in range(items)])}
    )
    empty = pa.table({"gen": pa.array([], pa.int32())})
    return StudyCells(facets, table, empty, item_table, names)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conditions", type=int, default=20)
    parser.add_argument("--grades", type=int, default=1_000_000)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--datasets", type=int, default=2)
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument(
        "--under-way",
        action="store_true",
        help="each condition graded on its own share of the items (50-100%%): every pair "
        "compared over the items both graded",
    )
    args = parser.parse_args()
    import scipy.stats  # noqa: F401  (its import, ~1 s, is not the computation's)

    cells = synthetic_cells(
        args.conditions, args.grades, args.epochs, args.datasets, args.under_way
    )
    before = peak_mb()
    print(
        f"{cells.grades.num_rows:,} grades: {args.conditions} conditions x "
        f"{cells.items.num_rows:,} items x {args.epochs} epoch(s), {args.datasets} datasets; "
        f"{args.resamples:,} resamples (peak RSS with the cells built: {before:,.0f} MB)"
    )
    wall, cpu = time.perf_counter(), time.process_time()
    stats = study_statistics(cells, Options(resamples=args.resamples))
    tables = [comparisons_table(stats), rankings_table(stats), components_table(stats)]
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    pairs = tables[0].num_rows
    families = ", ".join(
        f"{key.scope}{'/' + key.dataset if key.dataset else ''} {len(f.pairs)} pairs"
        for key, f in stats.families
    )
    print(f"families: {families}")
    print(
        f"{pairs:,} comparisons in {wall:.1f} s wall, {cpu:.1f} s CPU; peak RSS {peak_mb():,.0f} MB"
    )


if __name__ == "__main__":
    main()

"""Entry point for Ray jobs: runs a whole study (generate, then grade) on the cluster.

    ray job submit --working-dir . -- exec python jobs/sweep.py configs/demo.yaml --yes

Arguments are those of `itemeval run` (see `itemeval run --help`). Under `ray job submit`,
`RAY_ADDRESS` is set, so the driver joins the cluster instead of starting a local Ray. The exit
code is `itemeval run`'s (0 done, 1 cell errors, 2 bad input, 3 not confirmed, 4 budget cap).
"""

from __future__ import annotations

import sys
from pathlib import Path

# `--working-dir .` ships the repository; a script's own folder is what Python puts on sys.path,
# so add the repository root for clusters where itemeval is not pip-installed.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from itemeval.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["run", *sys.argv[1:]]))

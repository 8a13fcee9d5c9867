"""Writes tests/slow_tests.txt from the CPU times of a run (`make slow-tests`): the tests that
took a second of CPU or more (their process and the children they waited for), or 20 s of wall,
are `slow`, and `make test-fast` leaves them out."""

from __future__ import annotations

import json
import sys
from pathlib import Path

CPU_S, WALL_S = 1.0, 20.0
HEADER = """\
# The tests marked `slow` by measurement (tests/conftest.py): a second of CPU or more (the test's
# process and the children it waited for: CLI runs, servers), or 20 s of wall, in a parallel run
# of the suite. `make test-fast` leaves them out; `make test` runs them. Remeasure with
# `make slow-tests` (tests/slow_tests.py writes this file).
"""


def main(times: Path) -> None:
    slow = set()
    for line in times.read_text().splitlines():
        test = json.loads(line)
        if test["cpu_s"] >= CPU_S or test["wall_s"] >= WALL_S:
            slow.add(test["test"])
    out = Path(__file__).with_name("slow_tests.txt")
    out.write_text(HEADER + "".join(f"{test}\n" for test in sorted(slow)))
    print(f"{out}: {len(slow)} tests")


if __name__ == "__main__":
    main(Path(sys.argv[1]))

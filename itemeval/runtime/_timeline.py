"""Where a run's wall time goes, for `ITEMEVAL_TIMINGS=1` (printed to stderr at the end).

Marks are seconds since the process started (from /proc, so the interpreter's start and the
imports count too, as a user timing the command sees them).
"""

from __future__ import annotations

import os
import sys
import time


def _process_started_at() -> float:
    """The wall-clock moment this process started (Linux), else now.

    /proc gives the start in clock ticks since boot. The boot's own wall time (`btime` in
    /proc/stat) is whole seconds, which put every mark up to a second off; the process's age
    on the boot clock does not round."""
    try:
        with open("/proc/self/stat") as handle:
            start_ticks = int(handle.read().rsplit(")", 1)[1].split()[19])
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK")
        return time.time() - age
    except (OSError, ValueError, AttributeError):  # no /proc, or no boot clock (not Linux)
        return time.time()


class Timeline:
    def __init__(self) -> None:
        self.enabled = os.environ.get("ITEMEVAL_TIMINGS", "") not in ("", "0")
        self._start = _process_started_at()
        self.marks: list[tuple[str, float]] = []

    def mark(self, what: str) -> None:
        if self.enabled:
            self.marks.append((what, time.time() - self._start))

    def report(self) -> None:
        if not self.enabled or not self.marks:
            return
        previous = 0.0
        lines = []
        for what, at in self.marks:
            lines.append(f"  {at:7.2f} s  (+{at - previous:5.2f})  {what}")
            previous = at
        print("timings since the process started:\n" + "\n".join(lines), file=sys.stderr)


#: The run's timeline (one per process: one run at a time).
TIMELINE = Timeline()

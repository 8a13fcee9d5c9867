"""Progress of a run: a live line on a terminal, periodic log lines otherwise, nothing quiet.

Shown per stage: cells done of total, requests/s, tokens, USD spent against the estimate,
errors by code, an ETA from the recent rate, and what is wrong right now (`status`: workers
down, a rate limiter not answering), so a stalled run says why.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from typing import Any, TextIO

from itemeval.runtime._shards import ShardSummary

LOG_EVERY_S = 10.0
REDRAW_EVERY_S = 0.25


class Progress:
    def __init__(self, *, quiet: bool = False, stream: TextIO | None = None):
        self.quiet = quiet
        self.stream = stream or sys.stderr
        self.live = not quiet and self.stream.isatty()
        self._stage = ""
        self._total = 0
        self._estimate = 0.0
        self._start = time.monotonic()
        self._last_draw = 0.0
        self._last_log = 0.0
        self.done = 0
        self.calls = 0
        self.cached = 0
        self.tokens = 0
        self.usd = 0.0
        self.errors: Counter[str] = Counter()
        self.parse_failures: Counter[str] = Counter()
        self.status = ""  # what is wrong right now ("" when all is well)
        self.compacting = ""  # what the run's compaction does beside dispatch, if anything

    def begin(self, stage: str, total_cells: int, estimate_usd: float) -> None:
        self._stage = stage
        self._total = total_cells
        self._estimate = estimate_usd
        self._start = time.monotonic()
        self._last_log = self._start
        self.done = self.calls = self.cached = self.tokens = 0
        self.usd = 0.0
        self.errors = Counter()
        self.parse_failures = Counter()
        self.message(f"{stage}: {total_cells:,} cells to do (estimate ${estimate_usd:,.2f})")

    def add(self, summary: ShardSummary) -> None:
        self.done += summary.cells
        self.calls += summary.calls
        self.cached += summary.cached
        self.tokens += summary.input_tokens + summary.output_tokens
        self.usd += summary.usd
        self.errors.update(summary.errors)
        self.parse_failures.update(summary.parse_failures)
        self.tick()

    def recount(self, correction: Any) -> None:
        """Add what the store holds beyond what the summaries said (`dispatch.RowCost`: rows of
        shards that ended without a summary), so the final line counts what was stored."""
        self.done += correction.done + correction.errors
        self.calls += correction.calls
        self.cached += correction.cached
        self.tokens += correction.input_tokens + correction.output_tokens
        self.usd += correction.usd

    def tick(self, force: bool = False) -> None:
        if self.quiet:
            return
        now = time.monotonic()
        if self.live:
            if force or now - self._last_draw >= REDRAW_EVERY_S:
                self._last_draw = now
                self.stream.write("\r\x1b[2K" + self.line())
                self.stream.flush()
        elif force or now - self._last_log >= LOG_EVERY_S:
            self._last_log = now
            self.stream.write(self.line() + "\n")
            self.stream.flush()

    def end(self) -> None:
        if self.quiet:
            return
        if self.live:
            self.stream.write("\r\x1b[2K")
        self.stream.write(self.line(final=True) + "\n")
        self.stream.flush()

    def message(self, text: str) -> None:
        if self.quiet:
            return
        if self.live:
            self.stream.write("\r\x1b[2K")
        self.stream.write(text + "\n")
        self.stream.flush()

    def line(self, final: bool = False) -> str:
        elapsed = max(time.monotonic() - self._start, 1e-6)
        rate = self.calls / elapsed
        parts = [
            f"{self._stage} {self.done:,}/{self._total:,} cells",
            f"{rate:,.0f} req/s",
            f"{self.tokens:,} tok",
            f"${self.usd:,.2f} of ~${self._estimate:,.2f}",
        ]
        if self.cached:
            parts.append(f"{self.cached:,} cached")
        if self.errors:
            parts.append("errors " + ", ".join(f"{k} {v}" for k, v in self.errors.most_common()))
        if self.parse_failures:
            parts.append(f"parse failures {sum(self.parse_failures.values())}")
        if final:
            parts.append(f"in {elapsed:,.1f}s")
        elif self.done and self._total > self.done:
            eta = (self._total - self.done) * elapsed / self.done
            parts.append(f"ETA {_duration(eta)}")
        if self.status and not final:
            parts.append(self.status)
        if self.compacting and not final:
            parts.append(self.compacting)
        return " | ".join(parts)


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f}s"
    if seconds < 5400:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"

"""docs/providers.md's limiter section quotes the code's figures: each one is read here from the
code (constructor defaults, module constants), and every number in the section must be one of
them, so the two cannot drift apart."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from itemeval.providers import _transport as transport
from itemeval.providers.limits import ConcurrencyPool, LeasedSlots, RateBucket
from itemeval.providers.limits import _concurrency as concurrency
from itemeval.providers.limits import _machine as machine_limiter
from itemeval.providers.limits import _ratebucket as ratebucket
from itemeval.providers.limits import _ratelimiter as ratelimiter
from itemeval.providers.types import ModelRequest, SamplingParams

DOC = Path(__file__).resolve().parents[2] / "docs" / "providers.md"
SECTION = "## Limits, and how they hold across a cluster"


def _default(function, name: str) -> float:
    return inspect.signature(function).parameters[name].default


def _n(value: float) -> str:
    """A figure as the doc writes it: 1.0 -> 1, 0.05 -> 0.05."""
    return f"{value:g}"


def _section() -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index(SECTION)
    return text[start : text.index("\n## ", start + len(SECTION))]


def _chars_per_token() -> int:
    def estimate(chars: int) -> int:
        message = {"role": "user", "content": "x" * chars}
        request = ModelRequest("m", (message,), SamplingParams(max_tokens=10))
        return transport.estimate_tokens(request)

    return round(4000 / (estimate(4000) - estimate(0)))


def _figures() -> list[str]:
    """Each figure of the section, written as the section writes it, from the code."""
    bucket = RateBucket.__init__
    limiter = ratelimiter.RateLimiter.__init__
    slots = LeasedSlots.__init__
    pool = ConcurrencyPool.__init__
    late = _default(limiter, "late_s")
    assert late < _default(bucket, "slack_s")  # the bucket's rate allows for the lateness
    return [
        f"`horizon_s` = {_n(_default(bucket, 'horizon_s'))} s",
        f"`late_s` = {_n(late)} s",
        f"`slack_s` = {_n(_default(bucket, 'slack_s'))} s",
        f"`window_s` = {_n(_default(bucket, 'window_s'))} s",
        f"{_n(ratebucket.TOKEN_CAPACITY_SHARE * 100)}% of a window's tokens",
        f"within {_n(round((1 - ratebucket.WHOLE_REQUESTS_SHARE) * 100))}%",
        f"~{_chars_per_token()} characters a token",
        f"or {transport.DEFAULT_OUTPUT_ESTIMATE})",
        f"(default {_n(_default(bucket, 'default_pause_s'))} s, at most "
        f"{_n(_default(bucket, 'max_pause_s'))} s)",
        f"multiplies\n  the rate by {_n(_default(bucket, 'decrease_factor'))}",
        f"at most once per {_n(_default(bucket, 'decrease_cooldown_s'))} s",
        f"never below {_n(_default(bucket, 'min_rate_factor'))} of the limit",
        f"{_n(_default(bucket, 'recovery_per_s'))} of the limit per second",
        f"for {_n(_default(limiter, 'horizon_s'))} s of the demand",
        f"at most {_default(limiter, 'batch')}\n  per call",
        f"at least {_n(_default(limiter, 'poll_interval_s') * 1000)} ms and at\n  most "
        f"{_n(_default(limiter, 'max_wait_s'))} s",
        # The retry of a source that does not answer: min(1, 0.1 + waited / 10), both sides.
        "after 0.1 s plus a tenth of the time waited so far, at most\n  1 s",
        f"at once and every {_n(concurrency.WARN_EVERY_S)} s",
        f"after {_n(_default(limiter, 'source_timeout_s'))} s the waiting",
        f"renews every {_n(_default(slots, 'renew_s'))} s",
        f"after {_n(_default(slots, 'idle_s'))} s idle",
        f"not renewed for {_n(_default(pool, 'ttl_s'))} s expires",
        f"first {_n(_default(pool, 'freeze_s'))} s",
        f"within {_n(machine_limiter.LOCK_WAIT_S)} s treats",
    ]


def test_every_figure_of_the_limiter_section_is_the_codes():
    section = _section()
    missing = [figure for figure in _figures() if figure not in section]
    assert not missing, f"docs/providers.md does not say (or no longer says) {missing}"


def test_the_limiter_section_quotes_no_other_figure():
    section = _section()
    for figure in _figures():
        section = section.replace(figure, " ")
    # Not figures of the code: the minute (60 s), HTTP 429, exit 2, "at 0" over-limit arrivals,
    # and names with digits in them.
    section = re.sub(r"\b(60|429s?|2|0)\b", " ", section)
    section = re.sub(r"\w*\d\w*(\.py|\])|\w+_\d+", " ", section)
    left = re.findall(r"\d+(?:\.\d+)?", section)
    assert not left, f"figures in the section that no test reads from the code: {left}"


def test_the_retry_wait_the_section_quotes_is_the_codes():
    source = inspect.getsource(ratelimiter.RateLimiter._refill_loop)
    assert "min(1.0, 0.1 + waited / 10)" in source
    assert "min(1.0, 0.1 + waited / 10)" in inspect.getsource(LeasedSlots._lease)

"""The sim-server's prompt cache: which part of a prompt a provider would have served from cache.

Two rules, as the providers document them:

* **Automatic prefix caching** (OpenAI chat completions, Gemini's implicit caching): a prompt of
  at least the model's `min_cacheable_tokens` (1024 by default) is cached by prefix; a later
  prompt sharing a prefix reports that prefix as cached, counted in steps of 128 tokens from the
  minimum (1024, 1152, 1280, ...), as OpenAI reports `cached_tokens`.
* **Explicit breakpoints** (Anthropic): a `cache_control: {"type": "ephemeral"}` on a system or
  message content block (or at the top level of the request: the last block) marks the prefix
  ending with that block. At most 4 breakpoints. For each breakpoint the cache is searched at
  the block boundaries from it back 20 blocks; the longest prefix found is read
  (`cache_read_input_tokens`), the prefix up to the last breakpoint beyond it is written
  (`cache_creation_input_tokens`), and `input_tokens` counts only what comes after the last
  breakpoint. A prefix shorter than the model's minimum is neither read nor written.

Entries live `ttl_s` since their last use (`long_ttl_s` for Anthropic's `ttl: "1h"`), are kept
per route and model (a prefix cached for one model is not a hit for another), and number at most
`max_entries` (least recently used dropped first), so memory stays bounded however long the
server runs. Token positions follow the simulator's own count (`engine.input_tokens`: 4 per
message, then a token per 4 characters of its text), so cached + uncached = the prompt tokens.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from itemeval.simulator._engine import count_tokens
from itemeval.simulator._settings import PromptCacheSettings

#: OpenAI reports cached tokens in steps of 128 beyond the 1024-token minimum.
STEP_TOKENS = 128
#: Anthropic looks for earlier cache entries at most this many blocks before a breakpoint.
LOOKBACK_BLOCKS = 20
MAX_BREAKPOINTS = 4
_TTLS = ("5m", "1h")


@dataclass(frozen=True, slots=True)
class CacheUsage:
    """How much of one prompt was read from, and written to, the cache (tokens)."""

    read: int = 0
    write_5m: int = 0
    write_1h: int = 0

    @property
    def written(self) -> int:
        return self.write_5m + self.write_1h


NO_CACHE = CacheUsage()


def anthropic_breakpoints(messages: Sequence[Mapping[str, Any]], top_level: Any) -> int:
    """Check the `cache_control` markers of an Anthropic request (system first); their number.

    Raises ValueError, worded like Anthropic's 400s, for an unknown type or ttl, more than 4
    breakpoints, or a 1h entry after a 5m one."""
    found: list[str] = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            for block in content:
                if isinstance(block, Mapping) and block.get("cache_control") is not None:
                    found.append(_ttl(block["cache_control"]))
    if top_level is not None:
        found.append(_ttl(top_level))
    if len(found) > MAX_BREAKPOINTS:
        raise ValueError(
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {len(found)}."
        )
    if "5m" in found and "1h" in found[found.index("5m") :]:
        raise ValueError("cache_control entries with ttl '1h' must come before those with '5m'")
    return len(found)


def _ttl(control: Any) -> str:
    if not isinstance(control, Mapping) or control.get("type") != "ephemeral":
        raise ValueError("cache_control.type: Input should be 'ephemeral'")
    ttl = control.get("ttl", "5m")
    if ttl not in _TTLS:
        raise ValueError("cache_control.ttl: Input should be '5m' or '1h'")
    return str(ttl)


class PromptCache:
    """Prefix entries (16-byte digests) with their expiry; see the module docstring."""

    def __init__(self, settings: PromptCacheSettings | None = None):
        self.settings = settings or PromptCacheSettings()
        self._entries: OrderedDict[bytes, float] = OrderedDict()
        self._ttl = {"5m": self.settings.ttl_s, "1h": self.settings.long_ttl_s}

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()

    # ---------------------------------------------------------------- the two rules

    def automatic(
        self,
        scope: str,
        messages: Sequence[Mapping[str, Any]],
        prompt_tokens: int,
        min_tokens: int,
        now: float | None = None,
    ) -> int:
        """Cached tokens of a prompt under automatic prefix caching (0 on a miss)."""
        if not self.settings.enabled or prompt_tokens < min_tokens:
            return 0
        now = time.monotonic() if now is None else now
        bounds = range(min_tokens, prompt_tokens + 1, STEP_TOKENS)
        digests = _digests_at(scope, messages, bounds)
        cached = 0
        for tokens, digest in zip(reversed(bounds), reversed(digests), strict=True):
            if self._alive(digest, now):
                cached = tokens
                break
        expiry = now + self.settings.ttl_s
        for digest in digests:
            self._put(digest, expiry, now)
        return cached

    def explicit(
        self,
        scope: str,
        messages: Sequence[Mapping[str, Any]],
        top_level: Any,
        min_tokens: int,
        now: float | None = None,
    ) -> CacheUsage:
        """Read and written tokens of an Anthropic request (checked by `anthropic_breakpoints`)."""
        if not self.settings.enabled:
            return NO_CACHE
        ends, marks = _block_ends(scope, messages)
        if top_level is not None and ends:
            last = len(ends) - 1
            marks = [m for m in marks if m[0] != last] + [(last, _ttl(top_level))]
        if not marks:
            return NO_CACHE
        now = time.monotonic() if now is None else now
        read = 0
        hit = b""
        for index, _ in marks:
            for j in range(index, max(-1, index - LOOKBACK_BLOCKS - 1), -1):
                tokens, digest = ends[j]
                if tokens < min_tokens or tokens <= read:
                    break
                if self._alive(digest, now):
                    read = tokens
                    hit = digest
                    break
        if read:  # a read refreshes the entry it found (never shortening a 1h entry)
            self._put(hit, max(self._entries[hit], now + self.settings.ttl_s), now)
        written = {"5m": 0, "1h": 0}
        done = read
        for index, ttl in marks:
            tokens, digest = ends[index]
            if tokens < min_tokens:
                continue
            self._put(digest, now + self._ttl[ttl], now)  # written, or refreshed when read
            if tokens > done:
                written[ttl] += tokens - done
                done = tokens
        return CacheUsage(read, written["5m"], written["1h"])

    # ---------------------------------------------------------------- entries

    def _alive(self, digest: bytes, now: float) -> bool:
        expiry = self._entries.get(digest)
        return expiry is not None and expiry > now

    def _put(self, digest: bytes, expiry: float, now: float) -> None:
        entries = self._entries
        entries[digest] = expiry
        entries.move_to_end(digest)
        limit = self.settings.max_entries
        # The front is the least recently used: drop it while expired or over the cap.
        while entries:
            oldest_expiry = next(iter(entries.values()))
            if oldest_expiry > now and len(entries) <= limit:
                break
            entries.popitem(last=False)


# --------------------------------------------------------------------------- prefix digests


def _start(scope: str) -> Any:
    return hashlib.blake2b(scope.encode("utf-8", "surrogatepass"), digest_size=16)


def _role(message: Mapping[str, Any]) -> bytes:
    return b"\x1e" + str(message.get("role", "")).encode() + b"\x1f"


def _text(block: Any) -> str:
    return str(block.get("text", "")) if isinstance(block, Mapping) else ""


def _digests_at(
    scope: str, messages: Sequence[Mapping[str, Any]], bounds: Iterable[int]
) -> list[bytes]:
    """The digest of the prompt's first `b` tokens for each increasing `b` in `bounds`."""
    h = _start(scope)
    out: list[bytes] = []
    todo = iter(bounds)
    bound = next(todo, None)
    before = 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            text = content
        elif isinstance(content, list):
            text = "".join(_text(b) for b in content)
        else:
            text = ""
        h.update(_role(message))
        size = 4 + count_tokens(text)
        done = 0
        while bound is not None and bound <= before + size:
            chars = max(0, (bound - before - 4) * 4)
            if chars > done:
                h.update(text[done:chars].encode("utf-8", "surrogatepass"))
                done = chars
            out.append(h.digest())
            bound = next(todo, None)
        if done < len(text):
            h.update(text[done:].encode("utf-8", "surrogatepass"))
        before += size
    return out


def _block_ends(
    scope: str, messages: Sequence[Mapping[str, Any]]
) -> tuple[list[tuple[int, bytes]], list[tuple[int, str]]]:
    """Every content block's end as (prompt tokens up to it, digest of that prefix), and the
    breakpoints as (block index, ttl)."""
    h = _start(scope)
    ends: list[tuple[int, bytes]] = []
    marks: list[tuple[int, str]] = []
    before = 0
    for message in messages:
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"text": content or ""}]
        h.update(_role(message))
        chars = 0
        for block in blocks:
            text = _text(block)
            # Block boundaries are kept apart, so [ab][c] and [a][bc] are different prefixes.
            h.update(text.encode("utf-8", "surrogatepass") + b"\x1d")
            chars += len(text)
            ends.append((before + 4 + -(-chars // 4), h.digest()))  # ceil(chars / 4)
            control = block.get("cache_control") if isinstance(block, Mapping) else None
            if control is not None:
                marks.append((len(ends) - 1, _ttl(control)))
        before += 4 + -(-chars // 4)
    return ends, marks

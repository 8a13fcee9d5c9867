"""Where an Anthropic request marks its prompt-cache breakpoint, and when (`cache_control`).

Anthropic caches a prompt prefix only where the request marks it, bills a write 1.25x the input
price and a read 0.1x, and keeps an entry 5 minutes after its last use. OpenAI and Gemini cache
long prefixes on their own, so only the Anthropic client asks this module.

**What is marked: the stable prefix.** Everything before a request's final message: the system
prompt (for a solver, the item's effective task prompt: a dataset's `taskPrompt`, its few-shot
examples and instructions, the same for every item of the dataset) and any turns before the
last one. The final message carries the item (a solver's question; a judge's rubric rendered
around the item, the response and the reference), so it differs from call to call. A judge's
prefix is its one-line system message: far below any cache minimum, so judge calls are never
marked; a rubric's own text is rendered around the item and is no prefix (a long rubric whose
static text comes first is cached by OpenAI and Gemini automatically).

**When it is marked.** A prefix of fewer than 1,024 UTF-8 bytes cannot hold the 1,024 tokens
the smallest Anthropic minimum asks for, and is never marked. Otherwise, per prefix (and model):

* the first request sends it unmarked: a prefix seen once may never come again, and a write
  would cost 25% more for nothing;
* the next one marks it: it writes the entry. While that write is in flight, other requests with
  the prefix wait for its answer (an entry is readable only once its write has answered, so each
  would otherwise pay for a write of its own), at most `WRITE_WAIT_S`, then mark it and read;
* once a response reports the entry read or written, every request marks it (reads, at 10%);
  an entry unused for longer than its lifetime is written again by the next marked request;
* a marked request whose response reports nothing read and nothing written shows the prefix is
  below this model's minimum: that prefix is not marked again.

The state is per client (one per endpoint per worker process), bounded to `MAX_PREFIXES`
entries, least recently used first out. Marks change only the wire body, never the messages: the
response cache's keys and the request hashes do not see them.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from itemeval.providers.types import ModelResult

#: Fewer bytes than this cannot hold the smallest cacheable prefix (1,024 tokens).
MIN_PREFIX_BYTES = 1024
#: How long an entry lives after its last use (Anthropic's default 5 minutes), less a margin
#: for the time between the provider's refresh and our reading of its response.
ENTRY_LIFETIME_S = 270.0
#: A marked request that has not answered after this long no longer blocks another write.
WRITE_WAIT_S = 120.0
MAX_PREFIXES = 4096

EPHEMERAL = {"type": "ephemeral"}


@dataclass(frozen=True, slots=True)
class Breakpoint:
    """A request's marked prefix: its digest, and whether this request is the one writing it."""

    digest: bytes
    writes: bool


@dataclass(frozen=True, slots=True)
class WriteInFlight:
    """Another request is writing the prefix's entry: wait for `done`, then decide again."""

    done: asyncio.Event


@dataclass(slots=True)
class _Prefix:
    alive_until: float = 0.0  # a confirmed entry (read or written), until then
    writing_until: float = 0.0  # a marked request is writing the entry, until then
    uncacheable: bool = False
    written: asyncio.Event | None = None  # set when the write in flight has answered


def stable_prefix_length(messages: Sequence[dict[str, str]]) -> int:
    """How many leading messages form the stable prefix: all but the final one (none when the
    final one is a system message: Anthropic moves system text ahead of every turn)."""
    if not messages or messages[-1].get("role") == "system":
        return 0
    return len(messages) - 1


class CacheBreakpoints:
    """Per-client decisions of which requests mark their stable prefix (see the module doc)."""

    def __init__(self, *, max_prefixes: int = MAX_PREFIXES):
        self._prefixes: OrderedDict[bytes, _Prefix] = OrderedDict()
        self._max = max_prefixes

    async def choose(self, model: str, messages: Sequence[dict[str, str]]) -> Breakpoint | None:
        """The breakpoint this request should mark, or None; waits while another request is
        writing the prefix's entry (at most `WRITE_WAIT_S`)."""
        for _ in range(3):
            decision = self.decide(model, messages)
            if not isinstance(decision, WriteInFlight):
                return decision
            try:
                await asyncio.wait_for(decision.done.wait(), timeout=WRITE_WAIT_S)
            except TimeoutError:
                return None
        return None

    def decide(
        self, model: str, messages: Sequence[dict[str, str]], now: float | None = None
    ) -> Breakpoint | WriteInFlight | None:
        """The breakpoint this request should mark, None to send it unmarked, or the write in
        flight to wait for."""
        count = stable_prefix_length(messages)
        if count == 0:
            return None
        texts = [(m.get("content") or "").encode("utf-8", "surrogatepass") for m in messages]
        if sum(len(t) for t in texts[:count]) < MIN_PREFIX_BYTES:
            return None
        digest = _digest(model, messages[:count], texts[:count])
        now = time.monotonic() if now is None else now
        state = self._prefixes.get(digest)
        if state is None:
            self._remember(digest, _Prefix())
            return None  # seen once: it may never come again
        self._prefixes.move_to_end(digest)
        if state.uncacheable:
            return None
        if state.alive_until > now:
            return Breakpoint(digest, writes=False)
        if state.writing_until > now and state.written is not None:
            return WriteInFlight(state.written)
        if state.written is not None:
            state.written.set()  # a write that never answered: release its waiters
        state.writing_until = now + WRITE_WAIT_S
        state.written = asyncio.Event()
        return Breakpoint(digest, writes=True)

    def settle(self, mark: Breakpoint, result: ModelResult, now: float | None = None) -> None:
        """What the response of a marked request says about its entry."""
        state = self._prefixes.get(mark.digest)
        if state is None:
            return
        now = time.monotonic() if now is None else now
        usage = result.usage
        if usage.cached_input_tokens or usage.cache_write_input_tokens:
            state.alive_until = now + ENTRY_LIFETIME_S
        elif result.ok and usage.input_tokens:
            # Marked, answered, and nothing cached: the prefix is under this model's minimum.
            state.uncacheable = True
        if mark.writes:
            state.writing_until = 0.0
            if state.written is not None:
                state.written.set()  # the waiters decide again: read, or write it themselves
                state.written = None

    def _remember(self, digest: bytes, state: _Prefix) -> None:
        self._prefixes[digest] = state
        while len(self._prefixes) > self._max:
            self._prefixes.popitem(last=False)


def _digest(model: str, messages: Sequence[dict[str, str]], texts: Sequence[bytes]) -> bytes:
    h = hashlib.blake2b(model.encode("utf-8", "surrogatepass"), digest_size=16)
    for message, text in zip(messages, texts, strict=True):
        h.update(b"\x1e" + str(message.get("role", "")).encode() + b"\x1f")
        h.update(len(text).to_bytes(8, "little") + text)
    return h.digest()


def marked_blocks(text: str) -> list[dict[str, Any]]:
    """`text` as one content block carrying the breakpoint."""
    return [{"type": "text", "text": text, "cache_control": dict(EPHEMERAL)}]

"""The most one call can use, in tokens: what the budget cap reserves before a call is sent.

The cap is a contract (`../shared/design.md`, "Budget cap"), so these are upper bounds, never
estimates:

* input: every tokenizer in use (byte-level BPE, SentencePiece with byte fallback) spends at
  least one UTF-8 byte of text per token, so the bytes of the messages bound their tokens; the
  chat template adds a few tokens per message and per request, bounded generously here;
* output: what the request lets the model write, as the wire client sends it (Anthropic's
  `max_tokens` is always set and includes thinking; OpenAI's `max_completion_tokens` includes
  reasoning; for Gemini the thinking budget is added to `maxOutputTokens`, to be safe). Without
  `max_tokens`, the model's own maximum output from the price table (`max_output`), else None:
  such a call has no bound, and a capped run refuses to plan it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from itemeval.providers._anthropic_messages import thinking_budget, wire_max_tokens
from itemeval.providers._settings import EndpointSettings
from itemeval.providers.types import SamplingParams

#: Chat-template tokens per message (role markers and separators), generously.
MESSAGE_OVERHEAD_TOKENS = 8
#: Chat-template tokens per request (priming of the answer), generously.
REQUEST_OVERHEAD_TOKENS = 16


def input_token_bound(messages: Iterable[Mapping[str, str]]) -> int:
    """At least as many tokens as the messages can take under any common tokenizer."""
    total = REQUEST_OVERHEAD_TOKENS
    for message in messages:
        total += len((message.get("content") or "").encode("utf-8")) + MESSAGE_OVERHEAD_TOKENS
    return total


def wire_of(settings: EndpointSettings) -> str:
    """The wire format the endpoint's client speaks (`sim` for the in-process simulator)."""
    if settings.kind != "sim":
        return settings.kind
    return "sim" if settings.in_process else settings.sim_settings.wire_format


def output_token_bound(
    settings: EndpointSettings, params: SamplingParams, model_max: int | None
) -> int | None:
    """The most output (reasoning included) a call with `params` can be billed for, or None
    when nothing bounds it (no `max_tokens` and no known model maximum)."""
    wire = wire_of(settings)
    if wire == "anthropic":
        return wire_max_tokens(params)
    if params.max_tokens is None:
        return model_max
    if wire == "gemini":
        return params.max_tokens + (thinking_budget(params) or 0)
    return params.max_tokens

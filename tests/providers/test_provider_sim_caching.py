"""Prompt caching on `itemeval sim-server`, reported the way each provider reports it: OpenAI's
automatic prefix caching (`cached_tokens` in 128-token steps from 1024), Anthropic's
`cache_control` breakpoints (writes, reads, TTLs, lookback, limits) and Gemini's implicit caching,
checked through the official SDKs and our clients; and the cache's own bounds."""

from __future__ import annotations

import asyncio
import json
import math
import time
import urllib.request
from typing import Any

import anthropic
import openai
import pytest

from itemeval.providers import (
    EndpointSettings,
    ModelRequest,
    PromptCacheSettings,
    SamplingParams,
    make_provider,
)
from itemeval.simulator._engine import input_tokens
from itemeval.simulator._prompt_cache import PromptCache


def long_text(tag: str, tokens: int) -> str:
    """About `tokens` simulator tokens of text unique to `tag` (so tests never share a prefix)."""
    words: list[str] = []
    size = 0
    i = 0
    while size < tokens * 4:
        word = f"{tag}{i}"
        words.append(word)
        size += len(word) + 1
        i += 1
    return " ".join(words)


def step_down(tokens: int) -> int:
    """What OpenAI reports for a shared prefix of `tokens`: 1024 + a multiple of 128, or 0."""
    return 0 if tokens < 1024 else 1024 + (tokens - 1024) // 128 * 128


def message_tokens(content: Any) -> int:
    return input_tokens([{"role": "x", "content": content}])


# --------------------------------------------------------------------------- OpenAI


def test_openai_reports_the_shared_prefix_in_128_token_steps(sim_server) -> None:
    client = openai.OpenAI(base_url=f"{sim_server.url}/v1", api_key="x", max_retries=0)
    system = long_text("oa", 1500)

    def ask(user: str, model: str = "sim/strong") -> Any:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        usage = client.chat.completions.create(model=model, messages=messages).usage
        assert usage.prompt_tokens == input_tokens(messages)  # cached tokens are included
        return usage

    assert ask("First question?").prompt_tokens_details.cached_tokens == 0
    # Another user turn: the system message and the user turn's role marker are shared.
    shared = message_tokens(system) + 4
    question = long_text("question", 300)
    assert ask(question).prompt_tokens_details.cached_tokens == step_down(shared)
    repeat = ask(question)  # the whole prompt again
    assert repeat.prompt_tokens_details.cached_tokens == step_down(repeat.prompt_tokens)
    assert repeat.prompt_tokens_details.cached_tokens > step_down(shared)
    # Caches are per model; prompts under 1024 tokens are never cached.
    assert ask("First question?", model="sim/weak").prompt_tokens_details.cached_tokens == 0
    short = [{"role": "user", "content": "A short prompt, asked twice."}]
    for _ in range(2):
        usage = client.chat.completions.create(model="sim/strong", messages=short).usage
        assert usage.prompt_tokens_details.cached_tokens == 0


@pytest.mark.serial  # a 0.4 s time to live
def test_cache_entries_expire_and_caching_can_be_turned_off(start_sim_server) -> None:
    server = start_sim_server("--cache-ttl-s", "0.4")
    off = start_sim_server("--no-prompt-cache")
    messages = [{"role": "user", "content": long_text("ttl", 1200)}]

    def cached(url: str) -> int:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)
        usage = client.chat.completions.create(model="sim/strong", messages=messages).usage
        return usage.prompt_tokens_details.cached_tokens

    assert [cached(server.url), cached(server.url)] == [0, step_down(input_tokens(messages))]
    time.sleep(0.6)
    assert cached(server.url) == 0  # expired: written anew
    assert [cached(off.url), cached(off.url)] == [0, 0]
    client = anthropic.Anthropic(base_url=off.url, api_key="x", max_retries=0)
    block = {"type": "text", "text": long_text("off", 1200), "cache_control": {"type": "ephemeral"}}
    for _ in range(2):
        usage = client.messages.create(
            model="sim/strong",
            max_tokens=20,
            system=[block],
            messages=[{"role": "user", "content": "Hi"}],
        ).usage
        assert usage.cache_creation_input_tokens == usage.cache_read_input_tokens == 0


# --------------------------------------------------------------------------- Anthropic


def anthropic_usage(client: anthropic.Anthropic, system: Any, messages: list, **extra: Any) -> Any:
    kwargs: dict[str, Any] = {"model": "sim/strong", "max_tokens": 20, "messages": messages}
    if system is not None:
        kwargs["system"] = system
    message = client.messages.create(**kwargs, **extra)
    usage = message.usage
    prompt = ([{"role": "system", "content": system}] if system else []) + messages
    # input_tokens + read + written is the whole prompt, as Anthropic documents.
    total = usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens
    assert total == input_tokens(prompt)
    return usage


def test_anthropic_breakpoint_is_written_then_read(sim_server) -> None:
    client = anthropic.Anthropic(base_url=sim_server.url, api_key="x", max_retries=0)
    text = long_text("an", 1500)
    system = [{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}]
    prefix = message_tokens(text)

    first = anthropic_usage(client, system, [{"role": "user", "content": "First?"}])
    assert (first.cache_creation_input_tokens, first.cache_read_input_tokens) == (prefix, 0)
    assert first.cache_creation.ephemeral_5m_input_tokens == prefix
    assert first.input_tokens == message_tokens("First?")  # only what follows the breakpoint
    second = anthropic_usage(client, system, [{"role": "user", "content": "Another one?"}])
    assert (second.cache_creation_input_tokens, second.cache_read_input_tokens) == (0, prefix)
    assert second.input_tokens == message_tokens("Another one?")

    # A 1h entry is reported as such; a prefix under the model's minimum is not cached at all.
    hour = [
        {
            "type": "text",
            "text": long_text("h", 1100),
            "cache_control": {"type": "ephemeral", "ttl": "1h"},
        }
    ]
    usage = anthropic_usage(client, hour, [{"role": "user", "content": "Q"}])
    assert (
        usage.cache_creation.ephemeral_1h_input_tokens == usage.cache_creation_input_tokens > 1024
    )
    small = [
        {"type": "text", "text": "Short system prompt.", "cache_control": {"type": "ephemeral"}}
    ]
    for _ in range(2):
        usage = anthropic_usage(client, small, [{"role": "user", "content": "Q"}])
        assert usage.cache_creation_input_tokens == usage.cache_read_input_tokens == 0


def test_anthropic_reads_the_longest_earlier_prefix_and_writes_up_to_the_last_breakpoint(
    sim_server,
) -> None:
    client = anthropic.Anthropic(base_url=sim_server.url, api_key="x", max_retries=0)
    text = long_text("two", 1200)
    system = [{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}]

    def turn(doc: str) -> list:
        block = {"type": "text", "text": doc, "cache_control": {"type": "ephemeral"}}
        return [{"role": "user", "content": [block, {"type": "text", "text": "Summarise it."}]}]

    doc_a, doc_b = long_text("docA", 300), long_text("docB", 300)
    through_doc = message_tokens(text) + 4 + math.ceil(len(doc_a) / 4)
    first = anthropic_usage(client, system, turn(doc_a))
    assert (first.cache_read_input_tokens, first.cache_creation_input_tokens) == (0, through_doc)
    # Same system, another document: the system breakpoint is read, the document written.
    through_b = message_tokens(text) + 4 + math.ceil(len(doc_b) / 4)
    second = anthropic_usage(client, system, turn(doc_b))
    assert second.cache_read_input_tokens == message_tokens(text)
    assert second.cache_creation_input_tokens == through_b - message_tokens(text)

    # Automatic caching (a top-level cache_control) in a conversation: the next turn finds the
    # previous turn's entry by looking back from its own last block.
    talk = [{"role": "user", "content": long_text("talk", 1100)}]
    auto = {"extra_body": {"cache_control": {"type": "ephemeral"}}}
    one = anthropic_usage(client, None, talk, **auto)
    assert one.cache_creation_input_tokens == input_tokens(talk) and one.input_tokens == 0
    talk += [{"role": "assistant", "content": "Noted."}, {"role": "user", "content": "And?"}]
    two = anthropic_usage(client, None, talk, **auto)
    assert two.cache_read_input_tokens == one.cache_creation_input_tokens
    assert two.input_tokens == 0


def test_anthropic_refuses_bad_breakpoints(sim_server) -> None:
    client = anthropic.Anthropic(base_url=sim_server.url, api_key="x", max_retries=0)
    mark = {"type": "ephemeral"}
    blocks = [{"type": "text", "text": f"part {i}", "cache_control": mark} for i in range(5)]
    with pytest.raises(anthropic.BadRequestError, match="maximum of 4"):
        client.messages.create(
            model="sim/strong", max_tokens=5, messages=[{"role": "user", "content": blocks}]
        )
    late_hour = [
        {"type": "text", "text": "a", "cache_control": mark},
        {"type": "text", "text": "b", "cache_control": {"type": "ephemeral", "ttl": "1h"}},
    ]
    with pytest.raises(anthropic.BadRequestError, match="1h"):
        client.messages.create(
            model="sim/strong", max_tokens=5, messages=[{"role": "user", "content": late_hour}]
        )
    with pytest.raises(anthropic.BadRequestError, match="ephemeral"):
        client.messages.create(
            model="sim/strong",
            max_tokens=5,
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "x", "cache_control": {"type": "forever"}}
                    ],
                }
            ],
        )


# --------------------------------------------------------------------------- Gemini, our clients


def gemini_usage(url: str, text: str) -> dict[str, Any]:
    body = {"contents": [{"role": "user", "parts": [{"text": text}]}]}
    request = urllib.request.Request(
        f"{url}/v1beta/models/sim/strong:generateContent",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())["usageMetadata"]


def test_gemini_reports_implicit_caching(sim_server) -> None:
    text = long_text("gem", 1300)
    first = gemini_usage(sim_server.url, text)
    assert "cachedContentTokenCount" not in first  # Gemini omits it when nothing was cached
    second = gemini_usage(sim_server.url, text)
    assert second["cachedContentTokenCount"] == step_down(second["promptTokenCount"])
    assert second["promptTokenCount"] == first["promptTokenCount"]


@pytest.mark.parametrize(("kind", "suffix"), [("openai", "/v1"), ("gemini", "/v1beta")])
def test_our_clients_see_the_cached_tokens(sim_server, kind: str, suffix: str) -> None:
    system = long_text(f"ours-{kind}", 1400)
    settings = EndpointSettings(kind=kind, base_url=sim_server.url + suffix)
    messages = ({"role": "system", "content": system}, {"role": "user", "content": "Q?"})
    request = ModelRequest("sim/strong", messages, SamplingParams(max_tokens=20))

    async def main() -> list:
        provider = make_provider(settings)
        try:
            return [await provider.complete(request) for _ in range(2)]
        finally:
            await provider.aclose()

    first, second = asyncio.run(main())
    assert first.ok and second.ok
    assert first.usage.cached_input_tokens == 0
    assert second.usage.cached_input_tokens == step_down(input_tokens(list(messages)))
    assert second.usage.input_tokens == first.usage.input_tokens == input_tokens(list(messages))


# --------------------------------------------------------------------------- the cache itself


def test_the_cache_stays_bounded_and_forgets_expired_entries() -> None:
    cache = PromptCache(PromptCacheSettings(ttl_s=10.0, max_entries=50))
    text = long_text("bound", 1100)
    for i in range(200):
        messages = [{"role": "user", "content": f"{i} {text}"}]
        cache.automatic("s", messages, input_tokens(messages), 1024, now=float(i))
    assert len(cache) <= 50
    messages = [{"role": "user", "content": text}]
    tokens = input_tokens(messages)
    assert cache.automatic("s", messages, tokens, 1024, now=1000.0) == 0
    assert cache.automatic("s", messages, tokens, 1024, now=1009.0) == step_down(tokens)
    assert cache.automatic("s", messages, tokens, 1024, now=1018.5) == step_down(
        tokens
    )  # refreshed
    assert cache.automatic("s", messages, tokens, 1024, now=1029.0) == 0  # 10.5 s unused
    assert cache.automatic("other scope", messages, tokens, 1024, now=1029.5) == 0


def test_an_anthropic_read_refreshes_the_entry_it_found() -> None:
    cache = PromptCache(PromptCacheSettings(ttl_s=10.0))
    mark = {"type": "ephemeral"}
    head = {"type": "text", "text": long_text("head", 1100)}

    def request(tail: str, marked_head: bool) -> list:
        first = {**head, "cache_control": mark} if marked_head else head
        return [
            {
                "role": "user",
                "content": [first, {"type": "text", "text": tail, "cache_control": mark}],
            }
        ]

    head_tokens = 4 + math.ceil(len(head["text"]) / 4)
    assert cache.explicit("s", request("a", True), None, 1024, now=0.0).read == 0
    # Found by looking back from a later breakpoint, at t = 9 and again at t = 15: alive only
    # because the read at t = 9 refreshed it (it was written to expire at t = 10).
    assert cache.explicit("s", request("b", False), None, 1024, now=9.0).read == head_tokens
    assert cache.explicit("s", request("c", False), None, 1024, now=15.0).read == head_tokens
    assert cache.explicit("s", request("d", False), None, 1024, now=40.0).read == 0

"""Prompt caching on our side: where the Anthropic client puts `cache_control` and when, how
cache reads and writes are priced, and that the budget cap's worst case stays an upper bound.

The breakpoint policy is checked against `itemeval sim-server`, which keeps Anthropic's rules
(entries only at marked breakpoints, writes and reads reported separately, a minimum length),
and the wire body against the canned-body server."""

from __future__ import annotations

import asyncio
import itertools
import random

import pytest
from provider_wire_server import WireServer
from test_provider_wire import FIXTURES, settings

from itemeval.providers import (
    EndpointSettings,
    ModelRequest,
    ModelResult,
    SamplingParams,
    Usage,
    make_provider,
)
from itemeval.providers._cache_breakpoints import CacheBreakpoints, WriteInFlight
from itemeval.providers.money import Pricing
from itemeval.simulator._engine import input_tokens


def long_text(tag: str, tokens: int) -> str:
    """About `tokens` simulator tokens of text unique to `tag`."""
    words, size, i = [], 0, 0
    while size < tokens * 4:
        word = f"{tag}{i}"
        words.append(word)
        size += len(word) + 1
        i += 1
    return " ".join(words)


def solver(system: str, question: str) -> tuple[dict[str, str], ...]:
    return ({"role": "system", "content": system}, {"role": "user", "content": question})


# --------------------------------------------------------------------------- the policy


def test_a_prefix_is_marked_from_its_second_use_and_written_once() -> None:
    policy = CacheBreakpoints()
    prompt = solver(long_text("p", 400), "Q1")
    assert policy.decide("m", prompt, now=0.0) is None  # seen once: no write premium
    write = policy.decide("m", solver(prompt[0]["content"], "Q2"), now=1.0)
    assert write is not None and write.writes
    # While that write is in flight, others wait for it (they could not read it yet).
    waiting = policy.decide("m", solver(prompt[0]["content"], "Q3"), now=1.5)
    assert isinstance(waiting, WriteInFlight) and not waiting.done.is_set()
    written = ModelResult(ok=True, usage=Usage(500, 5, cache_write_input_tokens=450))
    policy.settle(write, written, now=2.0)
    assert waiting.done.is_set()
    read = policy.decide("m", solver(prompt[0]["content"], "Q4"), now=3.0)
    assert read is not None and not read.writes
    # Another model has its own cache.
    assert policy.decide("other", prompt, now=3.0) is None
    # An entry unused for longer than its lifetime is written again.
    again = policy.decide("m", prompt, now=400.0)
    assert again is not None and again.writes


def test_prefixes_that_cannot_or_do_not_cache_are_not_marked() -> None:
    policy = CacheBreakpoints()
    short = solver("Answer with a letter.", "Q")
    for _ in range(3):
        assert policy.decide("m", short) is None  # under 1,024 bytes
    only_user = ({"role": "user", "content": long_text("u", 600)},)
    for _ in range(3):
        assert policy.decide("m", only_user) is None  # no prefix before the final message
    below_minimum = solver(long_text("b", 400), "Q")
    policy.decide("m", below_minimum, now=0.0)
    mark = policy.decide("m", below_minimum, now=1.0)
    assert mark is not None
    policy.settle(mark, ModelResult(ok=True, usage=Usage(420, 3)), now=2.0)  # nothing cached
    assert policy.decide("m", below_minimum, now=3.0) is None
    # A failed write lets the next request try again.
    other = solver(long_text("f", 400), "Q")
    policy.decide("m", other, now=0.0)
    failed = policy.decide("m", other, now=1.0)
    assert failed is not None
    policy.settle(failed, ModelResult(ok=False), now=2.0)
    retry = policy.decide("m", other, now=2.5)
    assert retry is not None and retry.writes


def test_the_policy_stays_bounded() -> None:
    policy = CacheBreakpoints(max_prefixes=10)
    for i in range(100):
        policy.decide("m", solver(long_text(f"x{i}-", 300), "Q"))
    assert len(policy._prefixes) == 10


# --------------------------------------------------------------------------- the wire body


def test_the_breakpoint_goes_on_the_last_block_before_the_final_message(monkeypatch) -> None:
    monkeypatch.setenv("ITEMEVAL_TEST_WIRE_KEY", "sk-test")
    system = long_text("wire", 400)

    async def bodies(messages_list: list[tuple[dict[str, str], ...]]) -> list[dict]:
        async with WireServer(FIXTURES) as server:
            provider = make_provider(settings("anthropic", server.url("an_ok")))
            try:
                for messages in messages_list:
                    await provider.complete(ModelRequest("m", messages))
            finally:
                await provider.aclose()
            return [seen.body for seen in server.seen]

    few_shot = (
        {"role": "system", "content": system},
        {"role": "user", "content": "Example question"},
        {"role": "assistant", "content": "Example answer"},
        {"role": "user", "content": "Q"},
    )
    first, second, third, fourth = asyncio.run(
        bodies([solver(system, "Q1"), solver(system, "Q2"), few_shot, few_shot])
    )
    assert first["system"] == system  # first use: unmarked, as before
    # The canned answer reports a cache write, so the entry is known from the second on.
    assert second["system"] == [
        {"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}
    ]
    assert second["messages"] == [{"role": "user", "content": "Q2"}]
    assert third["system"] == system  # a new prefix (system + the example turns)
    assert fourth["system"] == system
    assert fourth["messages"][1] == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Example answer", "cache_control": {"type": "ephemeral"}}
        ],
    }
    assert fourth["messages"][2] == {"role": "user", "content": "Q"}


# --------------------------------------------------------------------------- against the sim


def anthropic_sim(url: str) -> EndpointSettings:
    return EndpointSettings(
        kind="sim", base_url=url, max_concurrency=64, sim={"wire_format": "anthropic"}
    )


def test_the_sim_server_reads_what_our_client_marks(sim_server) -> None:
    system = long_text("task", 1500)  # a long task prompt shared by every item
    requests = [
        ModelRequest("sim/strong", solver(system, f"Question {i}?"), SamplingParams(max_tokens=20))
        for i in range(12)
    ]

    async def main() -> tuple[list[ModelResult], list[ModelResult]]:
        provider = make_provider(anthropic_sim(sim_server.url))
        try:
            first = [await provider.complete(r) for r in requests[:2]]
            # Then many at once: the entry exists, so every one of them reads it.
            rest = await asyncio.gather(*(provider.complete(r) for r in requests[2:]))
            return first, list(rest)
        finally:
            await provider.aclose()

    first, rest = asyncio.run(main())
    prompt = input_tokens(list(requests[0].messages))
    assert all(r.ok for r in [*first, *rest])
    assert first[0].usage.cached_input_tokens == first[0].usage.cache_write_input_tokens == 0
    assert first[1].usage.cache_write_input_tokens > 1400
    assert first[1].usage.cached_input_tokens == 0
    for result in rest:
        assert result.usage.cached_input_tokens == first[1].usage.cache_write_input_tokens
        assert result.usage.cache_write_input_tokens == 0
        assert result.usage.input_tokens == prompt  # cached tokens are part of the input
    price = Pricing.load().price("sim/strong")
    assert price is not None
    plain = [price.cost(Usage(r.usage.input_tokens, r.usage.output_tokens)) for r in rest]
    assert sum(price.cost(r.usage) for r in rest) < 0.2 * sum(plain)


def test_a_burst_waits_for_the_one_write_then_reads() -> None:
    """Anthropic makes an entry readable only once its write has answered: a burst of requests
    sharing a new prefix sends one write, and the others wait for its answer, then read."""
    system = long_text("burst", 500)
    policy = CacheBreakpoints()
    sent: list[tuple[int, bool | None]] = []  # (request, writes) in the order they are sent

    async def one(i: int) -> None:
        mark = await policy.choose("m", solver(system, f"Q{i}"))
        sent.append((i, None if mark is None else mark.writes))
        await asyncio.sleep(0.01)  # the provider answers
        if mark is not None:
            usage = Usage(600, 5, cache_write_input_tokens=550 if mark.writes else 0)
            usage = usage if mark.writes else Usage(600, 5, cached_input_tokens=550)
            policy.settle(mark, ModelResult(ok=True, usage=usage))

    async def main() -> None:
        await asyncio.gather(*(one(i) for i in range(20)))

    asyncio.run(main())
    kinds = [writes for _, writes in sent]
    assert kinds[:2] == [None, True]  # first use unmarked, then the one write
    assert kinds[2:] == [False] * 18  # the rest waited for it, then read


def test_waiters_are_released_when_the_write_fails_or_is_cancelled() -> None:
    system = long_text("fail", 500)
    policy = CacheBreakpoints()
    policy.decide("m", solver(system, "Q0"))
    write = policy.decide("m", solver(system, "Q1"))
    assert write is not None and not isinstance(write, WriteInFlight) and write.writes

    async def main() -> object:
        waiter = asyncio.ensure_future(policy.choose("m", solver(system, "Q2")))
        await asyncio.sleep(0.01)
        assert not waiter.done()
        policy.settle(write, ModelResult(ok=False))  # the write failed (or was cancelled)
        return await asyncio.wait_for(waiter, timeout=5)

    retry = asyncio.run(main())
    assert retry is not None and not isinstance(retry, WriteInFlight) and retry.writes


def test_a_short_task_prompt_is_never_marked_or_written(sim_server) -> None:
    # 600 simulator tokens: more than 1,024 bytes, less than the model's minimum.
    system = long_text("short", 600)
    request = ModelRequest("sim/weak", solver(system, "Q"), SamplingParams(max_tokens=20))

    async def main() -> list[ModelResult]:
        provider = make_provider(anthropic_sim(sim_server.url))
        try:
            return [await provider.complete(request) for _ in range(4)]
        finally:
            await provider.aclose()

    results = asyncio.run(main())
    assert all(
        r.usage.cached_input_tokens == r.usage.cache_write_input_tokens == 0 for r in results
    )


# --------------------------------------------------------------------------- prices


def test_cache_reads_and_writes_are_priced() -> None:
    pricing = Pricing.load()
    sonnet = pricing.price("claude-sonnet-4-5-20250929")
    assert sonnet is not None
    usage = Usage(
        input_tokens=10_000,
        output_tokens=1_000,
        cached_input_tokens=6_000,
        cache_write_input_tokens=3_000,
    )
    # 1,000 plain at $3, 6,000 read at $0.30, 3,000 written at $3.75, 1,000 out at $15 (per M)
    assert sonnet.cost(usage) == pytest.approx((3_000 + 1_800 + 11_250 + 15_000) / 1e6)
    assert sonnet.read_savings(6_000) == pytest.approx(6_000 * 2.70 / 1e6)
    gpt = pricing.price("gpt-4o-mini")
    assert gpt is not None and gpt.cache_write_price == gpt.input_per_m  # OpenAI: no premium


def test_the_worst_case_bounds_every_mix_of_reads_and_writes() -> None:
    pricing = Pricing.load()
    rng = random.Random(7)
    for model in ("claude-opus-4-1", "sim/strong", "gpt-4o", "gemini-2.5-pro"):
        price = pricing.price(model)
        assert price is not None
        for input_tokens_, output in itertools.product((1, 777, 50_000), (0, 1, 4096)):
            bound = price.worst_case(input_tokens_, output)
            for _ in range(50):
                written = rng.randint(0, input_tokens_)
                cached = rng.randint(0, input_tokens_ - written)
                usage = Usage(input_tokens_, output, cached, 0, written)
                assert price.cost(usage) <= bound + 1e-15
            # All of it written: the dearest call, exactly the bound for Anthropic prices.
            dearest = price.cost(Usage(input_tokens_, output, 0, 0, input_tokens_))
            assert dearest == pytest.approx(bound)


def test_a_pricing_file_may_set_cache_write(tmp_path) -> None:
    path = tmp_path / "prices.yaml"
    path.write_text("models:\n  my-model: {input: 2, output: 8, cache_write: 2.5}\n")
    price = Pricing.load(path).price("my-model")
    assert price is not None and price.cache_write_price == 2.5
    assert price.worst_case(1_000_000, 0) == pytest.approx(2.5)

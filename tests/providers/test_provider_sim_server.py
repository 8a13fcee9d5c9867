"""`itemeval sim-server` as a subprocess: the official OpenAI and Anthropic SDKs and our three
clients call it; its own limits with 429s; our client's rate against it; 429 bursts absorbed;
hidden reasoning on every wire; the stats tests check physical truth against (answers by model
and route, tokens billed, peak concurrency, admitted arrivals and windows, reset)."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anthropic
import numpy as np
import openai
import pytest

from itemeval.cli.sim import main as sim_server_main
from itemeval.providers import (
    EndpointSettings,
    ErrorCode,
    ModelRequest,
    ModelResult,
    SamplingParams,
    make_provider,
)
from itemeval.simulator._stats import ServerStats, max_in_window

MC = "Which planet is largest?\nA) Mars\nB) Jupiter\nC) Venus\nD) Mercury\nAnswer with a letter."


# --------------------------------------------------------------------------- official SDKs


def test_openai_sdk_gets_well_formed_answers(sim_server) -> None:
    client = openai.OpenAI(base_url=f"{sim_server.url}/v1", api_key="not-needed", max_retries=0)
    response = client.chat.completions.create(
        model="sim/strong",
        messages=[
            {"role": "system", "content": "You are a careful assistant."},
            {"role": "user", "content": MC},
        ],
        temperature=0,
        max_tokens=50,
    )
    assert response.object == "chat.completion"
    assert response.choices[0].message.content in {"A", "B", "C", "D"}
    assert response.choices[0].finish_reason == "stop"
    assert response.usage is not None and response.usage.prompt_tokens > 20
    assert response.usage.completion_tokens == 1
    assert response.usage.completion_tokens_details.reasoning_tokens == 0
    assert response.usage.prompt_tokens_details.cached_tokens == 0
    steered = client.chat.completions.create(
        model="sim/strong",
        messages=[{"role": "user", "content": MC}],
        extra_body={"itemeval_sim": {"item_id": "easy", "target": "B", "difficulty": 0.0}},
    )
    assert steered.choices[0].message.content == "B"
    raw = client.chat.completions.with_raw_response.create(
        model="sim/weak", messages=[{"role": "user", "content": "Hi"}]
    )
    assert raw.headers["x-request-id"].startswith("req_sim")
    assert "sim/judge" in {m.id for m in client.models.list()}
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(
            model="sim/nope", messages=[{"role": "user", "content": "x"}]
        )


def test_anthropic_sdk_gets_well_formed_answers(sim_server) -> None:
    client = anthropic.Anthropic(base_url=sim_server.url, api_key="not-needed", max_retries=0)
    message = client.messages.create(
        model="sim/medium",
        max_tokens=200,
        system="Answer True or False.",
        messages=[{"role": "user", "content": "Water boils at 100 C at sea level. True or False?"}],
    )
    assert message.type == "message" and message.role == "assistant"
    assert message.content[0].type == "text"
    assert message.content[0].text in {"True", "False"}
    assert message.stop_reason == "end_turn"
    assert message.usage.input_tokens > 10 and message.usage.output_tokens in (1, 2)
    with pytest.raises(anthropic.NotFoundError):
        client.messages.create(
            model="sim/nope", max_tokens=5, messages=[{"role": "user", "content": "x"}]
        )
    with pytest.raises(anthropic.BadRequestError):  # streaming is refused clearly
        client.messages.create(
            model="sim/weak", max_tokens=5, stream=True, messages=[{"role": "user", "content": "x"}]
        )


# --------------------------------------------------------------------------- our clients


def run_client(endpoint: dict[str, Any], requests: list[ModelRequest]) -> list[ModelResult]:
    settings = EndpointSettings(**endpoint)

    async def main() -> list[ModelResult]:
        provider = make_provider(settings)
        try:
            return list(await asyncio.gather(*(provider.complete(r) for r in requests)))
        finally:
            await provider.aclose()

    return asyncio.run(main())


def mc_request(
    i: int, model: str = "sim/strong", epoch: int = 0, difficulty: float | None = None
) -> ModelRequest:
    hints = {"item_id": f"mc-{i}", "target": "B", "modality": "choiceof4", "epoch": epoch}
    if difficulty is not None:
        hints["difficulty"] = difficulty
    return ModelRequest(
        model,
        ({"role": "user", "content": MC},),
        SamplingParams(temperature=0.0, max_tokens=64),
        sim_hints=hints,
    )


@pytest.mark.parametrize(
    ("endpoint", "suffix"),
    [
        ({"kind": "sim", "sim": {"wire_format": "openai"}}, "/v1"),
        ({"kind": "sim", "sim": {"wire_format": "anthropic"}}, ""),
        ({"kind": "openai"}, "/v1"),
        ({"kind": "anthropic"}, ""),
        ({"kind": "gemini"}, "/v1beta"),
    ],
)
def test_our_clients_speak_every_wire_format(sim_server, endpoint: dict, suffix: str) -> None:
    results = run_client(
        {**endpoint, "base_url": sim_server.url + suffix}, [mc_request(i) for i in range(20)]
    )
    assert all(r.ok for r in results), [r.error_message for r in results if not r.ok]
    assert all(r.text in {"A", "B", "C", "D"} for r in results)
    assert all(r.usage.input_tokens > 10 and r.usage.output_tokens == 1 for r in results)
    assert all(r.request_id for r in results)
    if endpoint["kind"] == "sim":  # hints travel: the strong model is mostly right
        assert sum(r.text == "B" for r in results) >= 12


def test_hints_make_http_answers_match_in_process_answers(sim_server) -> None:
    requests = [mc_request(i, "sim/medium", epoch=i % 3) for i in range(30)]
    http = run_client({"kind": "sim", "base_url": f"{sim_server.url}/v1"}, requests)
    local = run_client({"kind": "sim"}, requests)
    assert [r.text for r in http] == [r.text for r in local]


# --------------------------------------------------------------------------- limits


@pytest.mark.serial  # the fill is counted against the wall clock
def test_client_stays_under_600_rpm_and_reaches_90_percent(start_sim_server) -> None:
    server = start_sim_server("--rpm", "600", "--latency-ms", "20")
    n = 220  # about 22 s at 10 requests/s
    endpoint = {
        "kind": "sim",
        "base_url": f"{server.url}/v1",
        "requests_per_minute": 600,
        "max_concurrency": 32,
    }
    start = time.monotonic()
    results = run_client(endpoint, [mc_request(i) for i in range(n)])
    elapsed = time.monotonic() - start
    stats = server.stats()
    assert all(r.ok for r in results)
    assert stats["rate_limited"] == 0  # the server never had to refuse us
    arrivals = stats["requests"]
    assert arrivals == n
    span = stats["last_arrival_s"] - stats["first_arrival_s"]
    rate_per_minute = (arrivals - 1) / span * 60
    assert rate_per_minute <= 600
    assert rate_per_minute >= 540, f"{rate_per_minute:.0f} requests per minute"
    assert elapsed < 40


def test_a_burst_of_429s_is_absorbed_without_a_failed_result(start_sim_server) -> None:
    server = start_sim_server("--fault-429", "0.3", "--retry-after", "0.05", "--seed", "11")
    endpoint = {
        "kind": "sim",
        "base_url": f"{server.url}/v1",
        "requests_per_minute": 30_000,
        "max_concurrency": 16,
        "max_attempts": 12,
        "backoff_initial_s": 0.01,
        "backoff_max_s": 0.1,
    }
    results = run_client(endpoint, [mc_request(i) for i in range(80)])
    assert all(r.ok for r in results), [r.error_message for r in results if not r.ok]
    assert any(r.attempts > 1 for r in results)
    assert server.stats()["faults"]["rate_limit"] >= 10


def test_a_client_configured_too_fast_backs_off_on_the_servers_429s(start_sim_server) -> None:
    server = start_sim_server("--rpm", "1200")  # 20 per second
    endpoint = {
        "kind": "sim",
        "base_url": f"{server.url}/v1",
        "requests_per_minute": 6000,  # five times what the server allows
        "max_concurrency": 32,
        "max_attempts": 12,
        "backoff_initial_s": 0.05,
        "backoff_max_s": 0.5,
    }
    results = run_client(endpoint, [mc_request(i) for i in range(90)])
    stats = server.stats()
    assert all(r.ok for r in results), [r.error_message for r in results if not r.ok]
    assert stats["rate_limited"] > 0  # the server's own limit answered 429 ...
    assert stats["ok"] == 90  # ... and every request got through in the end


def test_injected_timeouts_and_server_errors(start_sim_server) -> None:
    server = start_sim_server("--fault-timeout", "0.5", "--fault-500", "0.5", "--hang-s", "2")
    endpoint = {
        "kind": "sim",
        "base_url": f"{server.url}/v1",
        "timeout_s": 0.3,
        "max_attempts": 1,
    }
    results = run_client(endpoint, [mc_request(i) for i in range(12)])
    codes = {r.error_code for r in results}
    assert codes <= {ErrorCode.TIMEOUT, ErrorCode.SERVER_ERROR}
    assert codes == {ErrorCode.TIMEOUT, ErrorCode.SERVER_ERROR}


def test_malformed_and_empty_bodies(start_sim_server) -> None:
    server = start_sim_server("--fault-malformed", "0.5", "--fault-empty", "0.5")
    for suffix, kind in (("/v1", "openai"), ("", "anthropic"), ("/v1beta", "gemini")):
        results = run_client(
            {"kind": kind, "base_url": server.url + suffix}, [mc_request(i) for i in range(10)]
        )
        assert {r.error_code for r in results} == {
            ErrorCode.MALFORMED_RESPONSE,
            ErrorCode.EMPTY_OUTPUT,
        }


# --------------------------------------------------------------------------- the command


def test_bad_models_file_exits_2_naming_the_file(tmp_path: Path, capsys) -> None:
    models = tmp_path / "models.yaml"
    models.write_text("models:\n  hero: {ability: 1.5}\n", encoding="utf-8")
    code = sim_server_main(["--models", str(models), "--port", "0"])
    err = capsys.readouterr().err
    assert code == 2
    assert "models.yaml" in err and "hero.ability" in err
    assert sim_server_main(["--fault-429", "2", "--port", "0"]) == 2
    assert "faults.rate_limit" in capsys.readouterr().err
    assert sim_server_main(["--batch-error-rate", "1.5", "--port", "0"]) == 2
    assert "batch.error_rate" in capsys.readouterr().err
    assert sim_server_main(["--cache-ttl-s", "0", "--batch-window-s", "-1", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "prompt_cache.ttl_s" in err and "batch.window_s" in err


def test_the_itemeval_root_command_has_sim_server(capsys) -> None:
    from itemeval.cli.main import build_parser

    args = build_parser().parse_args(["sim-server", "--port", "0", "--rpm", "600"])
    assert args.func.__name__ == "run_sim_server" and args.rpm == 600


def test_models_file_adds_models(start_sim_server, tmp_path: Path) -> None:
    models = tmp_path / "models.yaml"
    models.write_text("oracle: {ability: 1.0}\n", encoding="utf-8")
    server = start_sim_server("--models", str(models))
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0)
    assert "sim/oracle" in {m.id for m in client.models.list()}
    results = run_client(
        {"kind": "sim", "base_url": f"{server.url}/v1"},
        [mc_request(i, "sim/oracle", difficulty=0.0) for i in range(10)],
    )
    assert [r.text for r in results] == ["B"] * 10


# --------------------------------------------------------------------------- hidden reasoning


def test_the_reasoning_model_reasons_on_every_wire(sim_server) -> None:
    hints = {"itemeval_sim": {"item_id": "think-1", "target": "B", "modality": "choiceof4"}}
    messages = [{"role": "user", "content": MC}]
    oa = openai.OpenAI(base_url=f"{sim_server.url}/v1", api_key="x", max_retries=0)
    completion = oa.chat.completions.create(
        model="sim/reasoner", messages=messages, max_completion_tokens=4000, extra_body=hints
    )
    usage = completion.usage
    reasoning = usage.completion_tokens_details.reasoning_tokens
    assert 512 <= reasoning < 1536  # unasked: sim/reasoner's 1024 x (0.5 + u)
    assert usage.completion_tokens == reasoning + 1  # hidden reasoning, then one letter
    assert completion.choices[0].message.content in {"A", "B", "C", "D"}

    an = anthropic.Anthropic(base_url=sim_server.url, api_key="x", max_retries=0)
    message = an.messages.create(
        model="sim/reasoner", max_tokens=4000, messages=messages, extra_body=hints
    )
    thinking, text = message.content
    assert thinking.type == "thinking" and thinking.thinking and thinking.signature
    assert text.type == "text" and text.text == completion.choices[0].message.content
    assert message.usage.output_tokens == reasoning + 1  # thinking is billed as output
    assert message.usage.output_tokens_details.thinking_tokens == reasoning
    plain = an.messages.create(model="sim/strong", max_tokens=100, messages=messages)
    assert [block.type for block in plain.content] == ["text"]

    # max_tokens bounds reasoning and text together, as a provider never bills beyond it.
    cut = an.messages.create(model="sim/reasoner", max_tokens=100, messages=messages)
    assert cut.usage.output_tokens <= 100 and cut.stop_reason == "max_tokens"

    body = {"contents": [{"role": "user", "parts": [{"text": MC}]}], **hints}
    request = urllib.request.Request(
        f"{sim_server.url}/v1beta/models/sim/reasoner:generateContent",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        metadata = json.loads(response.read())["usageMetadata"]
    assert metadata["thoughtsTokenCount"] == reasoning and metadata["candidatesTokenCount"] == 1

    # Our client sees it too; with too small a max_tokens the reasoning eats the answer.
    roomy = ModelRequest("sim/reasoner", (messages[0],), SamplingParams(max_tokens=4000))
    tight = ModelRequest("sim/reasoner", (messages[0],), SamplingParams(max_tokens=64))
    roomy_result, tight_result = run_client(
        {"kind": "openai", "base_url": f"{sim_server.url}/v1"}, [roomy, tight]
    )
    assert roomy_result.ok and roomy_result.usage.reasoning_tokens > 500
    assert tight_result.error_code == ErrorCode.EMPTY_OUTPUT
    assert tight_result.usage.output_tokens == tight_result.usage.reasoning_tokens == 64


def test_anthropic_thinking_parameters_are_checked(sim_server) -> None:
    client = anthropic.Anthropic(base_url=sim_server.url, api_key="x", max_retries=0)
    messages = [{"role": "user", "content": MC}]
    with pytest.raises(anthropic.BadRequestError, match="greater than or equal to 1024"):
        client.messages.create(
            model="sim/strong",
            max_tokens=4000,
            messages=messages,
            thinking={"type": "enabled", "budget_tokens": 500},
        )
    with pytest.raises(anthropic.BadRequestError, match="max_tokens"):
        client.messages.create(
            model="sim/strong",
            max_tokens=2000,
            messages=messages,
            thinking={"type": "enabled", "budget_tokens": 2000},
        )
    message = client.messages.create(
        model="sim/strong",
        max_tokens=4096,
        messages=messages,
        thinking={"type": "enabled", "budget_tokens": 2048},
    )
    assert message.content[0].type == "thinking"
    assert 0 < message.usage.output_tokens_details.thinking_tokens <= 2048


# --------------------------------------------------------------------------- stats


def stats_of(server, query: str = "") -> dict:
    with urllib.request.urlopen(f"{server.url}/_sim/stats{query}", timeout=30) as response:
        return json.loads(response.read())


def test_stats_count_answers_by_model_and_route_and_bill_their_tokens(start_sim_server) -> None:
    server = start_sim_server()
    oa = openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0)
    an = anthropic.Anthropic(base_url=server.url, api_key="x", max_retries=0)
    billed = {"input": 0, "output": 0}
    for _ in range(3):
        usage = oa.chat.completions.create(
            model="sim/strong", messages=[{"role": "user", "content": MC}]
        ).usage
        billed["input"] += usage.prompt_tokens
        billed["output"] += usage.completion_tokens
    for _ in range(2):
        usage = an.messages.create(
            model="sim/reasoner", max_tokens=3000, messages=[{"role": "user", "content": MC}]
        ).usage
        billed["input"] += usage.input_tokens
        billed["output"] += usage.output_tokens
    (gemini,) = run_client({"kind": "gemini", "base_url": f"{server.url}/v1beta"}, [mc_request(0)])
    billed["input"] += gemini.usage.input_tokens
    billed["output"] += gemini.usage.output_tokens
    with pytest.raises(openai.NotFoundError):
        oa.chat.completions.create(model="sim/nope", messages=[{"role": "user", "content": "x"}])

    stats = stats_of(server)
    assert stats["ok"] == 6 and stats["requests"] == 7 and stats["errors"] == 1
    assert stats["ok_by_model"] == {"sim/strong": 4, "sim/reasoner": 2}
    assert stats["ok_by_route"] == {
        "/v1/chat/completions": 3,
        "/v1/messages": 2,
        "/v1beta/models/{model}:generateContent": 1,
    }
    assert stats["usage"]["input_tokens"] == billed["input"]
    assert stats["usage"]["output_tokens"] == billed["output"]
    assert stats["usage"]["reasoning_tokens"] > 1000  # the reasoner's, inside output_tokens
    assert stats["batch"]["ok"] == 0 and stats["in_flight"] == 0


def test_max_concurrent_is_the_peak_of_requests_in_flight(start_sim_server) -> None:
    server = start_sim_server("--latency-ms", "600")
    endpoint = {"kind": "sim", "base_url": f"{server.url}/v1", "max_concurrency": 12}
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(run_client, endpoint, [mc_request(i) for i in range(12)])
        deadline = time.monotonic() + 10
        while stats_of(server)["in_flight"] < 12 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert stats_of(server)["in_flight"] == 12  # seen live, mid-flight
        assert all(r.ok for r in running.result())
    stats = stats_of(server)
    assert stats["max_concurrent"] == 12 and stats["in_flight"] == 0
    # A client allowed 4 at a time never has more than 4 at the server.
    reset(server)
    results = run_client({**endpoint, "max_concurrency": 4}, [mc_request(i) for i in range(12)])
    assert all(r.ok for r in results)
    assert stats_of(server)["max_concurrent"] == 4


@pytest.mark.serial  # arrivals counted in a window of the wall clock
def test_arrivals_over_the_servers_concurrency_are_refused_and_counted(start_sim_server) -> None:
    server = start_sim_server("--latency-ms", "500", "--max-concurrency", "4")
    endpoint = {"kind": "sim", "base_url": f"{server.url}/v1", "max_concurrency": 12}
    # A client allowed 12 at once against a server that takes 4: 8 arrivals over the limit,
    # refused at once with a 429.
    results = run_client(
        {**endpoint, "max_attempts": 1, "max_rate_limited_attempts": 1},
        [mc_request(i) for i in range(12)],
    )
    refused = sum(r.error_code == ErrorCode.RATE_LIMITED for r in results)
    stats = stats_of(server)
    assert refused == 8 and stats["ok"] == 4 and stats["max_concurrent"] <= 12
    assert stats["over_limit"] == stats["over_concurrency"] == stats["rate_limited"] == 8
    assert stats["requests"] == 12 and stats["admitted"] == 4
    # A client held to 4 causes none.
    reset(server)
    results = run_client({**endpoint, "max_concurrency": 4}, [mc_request(i) for i in range(12)])
    assert all(r.ok for r in results)
    assert stats_of(server)["over_limit"] == 0


def reset(server) -> None:
    request = urllib.request.Request(f"{server.url}/_sim/reset", method="POST", data=b"")
    with urllib.request.urlopen(request, timeout=10) as response:
        assert json.loads(response.read()) == {"ok": True}


def brute_max_in_window(times: list[float], window_s: float) -> int:
    """An independent count: arrivals in (t - window, t] for every arrival t."""
    return max((sum(t - window_s < u <= t for u in times) for t in times), default=0)


@pytest.mark.serial  # arrivals counted in a window of the wall clock
def test_admitted_arrivals_give_the_most_requests_in_any_window(start_sim_server) -> None:
    server = start_sim_server("--rpm", "600")  # the server's bucket holds 10 requests
    endpoint = {"kind": "sim", "base_url": f"{server.url}/v1", "max_concurrency": 32}
    started = time.time()
    first = run_client(
        {**endpoint, "max_attempts": 1, "max_rate_limited_attempts": 1},
        [mc_request(i) for i in range(25)],
    )
    time.sleep(1.5)
    second = run_client(endpoint, [mc_request(i) for i in range(5)])
    refused = sum(r.error_code == ErrorCode.RATE_LIMITED for r in first)
    assert 10 <= 25 - refused <= 12 and all(r.ok for r in second)

    stats = stats_of(server, "?window_s=1&arrivals=1")
    times = stats["arrivals_s"]
    assert stats["admitted"] == len(times) == 30 - refused == stats["ok"]
    assert stats["rate_limited"] == refused and stats["requests"] == 30
    # Every arrival over the RPM is counted as such (what a client's limiter must never cause).
    assert stats["over_limit"] == stats["over_rpm"] == refused > 0
    assert stats["over_tpm"] == stats["over_concurrency"] == 0
    assert times == sorted(times) and times[25 - refused] - times[24 - refused] > 1.4
    assert stats["max_in_window"] == brute_max_in_window(times, 1.0) == 25 - refused
    assert started <= stats["first_arrival_epoch"] <= started + 5
    assert sum(stats["arrival_tokens"]) == stats["admitted_tokens"] > 0
    wide = stats_of(server, "?window_s=60")
    assert wide["max_in_window"] == len(times) and "arrivals_s" not in wide
    assert wide["max_tokens_in_window"] == stats["admitted_tokens"]
    with pytest.raises(urllib.error.HTTPError) as refused_query:
        stats_of(server, "?window_s=-3")
    assert refused_query.value.code == 400


def test_reset_forgets_counts_arrivals_and_cached_prefixes(start_sim_server) -> None:
    server = start_sim_server()
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0)
    messages = [{"role": "user", "content": "cache me " * 600}]  # ~1350 tokens

    def cached() -> int:
        usage = client.chat.completions.create(model="sim/strong", messages=messages).usage
        return usage.prompt_tokens_details.cached_tokens

    assert cached() == 0 and cached() > 0
    assert stats_of(server)["ok"] == 2
    reset(server)
    stats = stats_of(server, "?window_s=60&arrivals=1")
    assert stats["ok"] == stats["requests"] == stats["admitted"] == stats["max_concurrent"] == 0
    assert stats["ok_by_model"] == {} and stats["arrivals_s"] == [] and stats["max_in_window"] == 0
    assert stats["usage"]["input_tokens"] == 0 and stats["prompt_cache_entries"] == 0
    assert cached() == 0  # the cache was emptied too


def test_arrivals_of_a_million_requests_stay_small_and_fast() -> None:
    stats = ServerStats()
    for i in range(1_000_000):
        stats.admitted(i * 0.25, 3)  # four a second for 250,000 s
    assert stats.arrivals.itemsize * len(stats.arrivals) == 8_000_000
    assert stats.arrival_tokens.itemsize * len(stats.arrival_tokens) == 8_000_000
    started = time.perf_counter()
    report = stats.to_json(window_s=60)
    assert time.perf_counter() - started < 2.0
    assert report["max_in_window"] == 240  # (t - 60, t] holds 240 arrivals 0.25 s apart
    assert report["max_tokens_in_window"] == 720 and report["admitted_tokens"] == 3_000_000
    assert max_in_window(np.array([0.0, 60.0, 60.0, 119.9]), 60) == 3

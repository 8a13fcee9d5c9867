"""`itemeval sim-server` as a subprocess: the official OpenAI and Anthropic SDKs and our three
clients call it; its own limits with 429s; our client's rate against it; 429 bursts absorbed."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import anthropic
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

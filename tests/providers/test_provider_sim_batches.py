"""Batch APIs on `itemeval sim-server`, driven by the official SDKs: OpenAI Files and Batches,
Anthropic Message Batches. Creation, polling, results, partial failures, cancellation, expiry,
validation, listing, the live answers they must equal, the stats they are counted in, and a
driver killed mid-batch that a new driver picks up by id."""

from __future__ import annotations

import asyncio
import io
import json
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from typing import Any

import anthropic
import openai
import pytest

MC = "Which planet is largest?\nA) Mars\nB) Jupiter\nC) Venus\nD) Mercury\nAnswer with a letter."
TERMINAL = {"completed", "failed", "expired", "cancelled"}


@pytest.fixture(scope="module")
def quick(start_module_sim_server) -> Any:
    """Batches take 0.5 s and a quarter of their requests fail; live calls are limited to
    600 a minute (10 at once), which the batches must not feel."""
    return start_module_sim_server(
        "--batch-delay-s", "0.5", "--batch-error-rate", "0.25", "--rpm", "600"
    )


@pytest.fixture(scope="module")
def slow(start_module_sim_server) -> Any:
    """Batches take 3 s: time to cancel them, or to kill a driver, midway."""
    return start_module_sim_server("--batch-delay-s", "3")


@pytest.fixture(scope="module")
def short_window(start_module_sim_server) -> Any:
    """Batches would take 2 s but the completion window is 1 s: they expire half done."""
    return start_module_sim_server("--batch-delay-s", "2", "--batch-window-s", "1")


def openai_client(server: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0)


def anthropic_client(server: Any) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.url, api_key="x", max_retries=0)


def hints(i: int) -> dict[str, Any]:
    return {"item_id": f"batch-item-{i}", "target": "B", "modality": "choiceof4"}


def chat_body(i: int, model: str = "sim/strong") -> dict[str, Any]:
    return {
        "model": model,
        "messages": [{"role": "user", "content": MC}],
        "max_tokens": 50,
        "itemeval_sim": hints(i),
    }


def message_params(i: int, model: str = "sim/strong") -> dict[str, Any]:
    return {
        "model": model,
        "max_tokens": 50,
        "messages": [{"role": "user", "content": MC}],
        "itemeval_sim": hints(i),
    }


def upload(client: openai.OpenAI, lines: list[Any], purpose: str = "batch") -> str:
    text = "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines)
    return client.files.create(file=("input.jsonl", io.BytesIO(text.encode())), purpose=purpose).id


def request_line(custom_id: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}


def submit(client: openai.OpenAI, bodies: list[dict[str, Any]]) -> Any:
    file_id = upload(client, [request_line(f"req-{i}", b) for i, b in enumerate(bodies)])
    return client.batches.create(
        input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h"
    )


def wait_openai(client: openai.OpenAI, batch_id: str, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        batch = client.batches.retrieve(batch_id)
        if batch.status in TERMINAL:
            return batch
        time.sleep(0.05)
    raise AssertionError(f"batch {batch_id} still {batch.status} after {timeout} s")


def wait_anthropic(client: anthropic.Anthropic, batch_id: str, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        batch = client.messages.batches.retrieve(batch_id)
        if batch.processing_status == "ended":
            return batch
        time.sleep(0.05)
    raise AssertionError(f"batch {batch_id} still {batch.processing_status} after {timeout} s")


def file_lines(client: openai.OpenAI, file_id: str | None) -> list[dict[str, Any]]:
    if file_id is None:
        return []
    return [json.loads(line) for line in client.files.content(file_id).text.splitlines()]


def stats_of(server: Any) -> dict[str, Any]:
    return server.stats()


# --------------------------------------------------------------------------- OpenAI


def test_openai_batch_answers_as_live_calls_do_with_partial_failures(quick) -> None:
    client = openai_client(quick)
    before = stats_of(quick)
    bodies = [chat_body(i) for i in range(40)] + [chat_body(40, model="sim/nope")]
    created = submit(client, bodies)
    assert created.status == "validating" and created.completion_window == "24h"
    batch = wait_openai(client, created.id)

    assert batch.status == "completed" and batch.completed_at and batch.in_progress_at
    counts = batch.request_counts
    assert counts.total == 41 and counts.completed + counts.failed == 41
    assert counts.failed >= 2  # the unknown model, and the injected failures
    output = file_lines(client, batch.output_file_id)
    errors = file_lines(client, batch.error_file_id)
    assert len(output) == counts.completed and len(errors) == counts.failed
    assert {line["custom_id"] for line in output + errors} == {f"req-{i}" for i in range(41)}
    assert all(line["response"]["status_code"] == 200 for line in output)
    statuses = sorted(line["response"]["status_code"] for line in errors)
    assert statuses.count(404) == 1 and set(statuses) == {404, 500}
    assert all(line["error"] is None and "error" in line["response"]["body"] for line in errors)
    assert client.files.retrieve(batch.output_file_id).purpose == "batch_output"
    billed = sum(line["response"]["body"]["usage"]["prompt_tokens"] for line in output)
    assert batch.usage.input_tokens == billed and batch.model == "sim/strong"

    # Counted as batch work, not live traffic: no live request, no 429 for 41 requests in
    # half a second against a live limit of 10 at once.
    after = stats_of(quick)
    assert after["requests"] == before["requests"] and after["rate_limited"] == 0
    assert after["batch"]["ok"] - before["batch"]["ok"] == counts.completed
    assert after["batch"]["errored"] - before["batch"]["errored"] == counts.failed
    assert after["batch"]["completed"] - before["batch"]["completed"] == 1

    # The same answers as live calls for the same requests.
    for line in output[:5]:
        i = int(line["custom_id"].removeprefix("req-"))
        body = chat_body(i)
        live = client.chat.completions.create(
            model=body["model"],
            messages=body["messages"],
            max_tokens=body["max_tokens"],
            extra_body={"itemeval_sim": body["itemeval_sim"]},
        )
        answered = line["response"]["body"]
        assert answered["choices"][0]["message"]["content"] == live.choices[0].message.content
        assert answered["usage"]["completion_tokens"] == live.usage.completion_tokens

    # Failed requests resubmitted in a new batch draw their failures anew.
    failed = [e["custom_id"] for e in errors if e["response"]["status_code"] == 500]
    again = wait_openai(client, submit(client, [chat_body(i) for i in range(len(failed))]).id)
    assert again.request_counts.completed > 0


def test_openai_input_is_validated(quick) -> None:
    client = openai_client(quick)
    lines = [
        request_line("a", chat_body(0)),
        "{not json",
        request_line("a", chat_body(1)),
        {**request_line("c", chat_body(2)), "url": "/v1/embeddings"},
        {"custom_id": "d", "method": "POST", "url": "/v1/chat/completions"},
    ]
    file_id = upload(client, lines)
    created = client.batches.create(
        input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    batch = wait_openai(client, created.id)
    assert batch.status == "failed" and batch.failed_at and batch.output_file_id is None
    found = [(e.code, e.line) for e in batch.errors.data]
    assert found == [
        ("invalid_json_line", 2),
        ("duplicate_custom_id", 3),
        ("mismatched_endpoint", 4),
        ("missing_required_parameter", 5),
    ]
    with pytest.raises(openai.BadRequestError):
        client.batches.create(
            input_file_id=file_id, endpoint="/v1/embeddings", completion_window="24h"
        )
    with pytest.raises(openai.NotFoundError):
        client.batches.create(
            input_file_id="file-nope", endpoint="/v1/chat/completions", completion_window="24h"
        )
    other = upload(client, [request_line("x", chat_body(0))], purpose="user_data")
    with pytest.raises(openai.BadRequestError, match="purpose"):
        client.batches.create(
            input_file_id=other, endpoint="/v1/chat/completions", completion_window="24h"
        )


def test_openai_files_and_listing(quick) -> None:
    client = openai_client(quick)
    file_id = upload(client, [request_line("only", chat_body(0))])
    meta = client.files.retrieve(file_id)
    assert meta.purpose == "batch" and meta.filename == "input.jsonl" and meta.bytes > 50
    assert file_id in {f.id for f in client.files.list(purpose="batch")}
    assert json.loads(client.files.content(file_id).text)["custom_id"] == "only"
    ids = [submit(client, [chat_body(i)]).id for i in range(3)]
    listed = [b.id for b in client.batches.list(limit=2)]  # the SDK follows the pages
    assert listed[:3] == ids[::-1]  # newest first
    assert client.files.delete(file_id).deleted
    with pytest.raises(openai.NotFoundError):
        client.files.retrieve(file_id)
    for batch_id in ids:  # deleting the input file does not disturb its batches
        assert wait_openai(client, batch_id).request_counts.total == 1


def test_openai_cancel_keeps_what_was_done(slow) -> None:
    client = openai_client(slow)
    before = stats_of(slow)["batch"]
    batch = submit(client, [chat_body(i) for i in range(30)])
    deadline = time.monotonic() + 10
    while client.batches.retrieve(batch.id).request_counts.completed < 3:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert client.batches.cancel(batch.id).status == "cancelling"
    batch = wait_openai(client, batch.id)
    assert batch.status == "cancelled" and batch.cancelling_at and batch.cancelled_at
    done = batch.request_counts.completed
    assert 3 <= done < 30
    output = file_lines(client, batch.output_file_id)
    cancelled = file_lines(client, batch.error_file_id)
    assert len(output) == done and len(cancelled) == 30 - done
    assert all(e["response"] is None for e in cancelled)
    assert {e["error"]["code"] for e in cancelled} == {"batch_cancelled"}
    assert client.batches.cancel(batch.id).status == "cancelled"  # unchanged once ended
    # Cancelled at once, while still validating: nothing ran.
    early = submit(client, [chat_body(i) for i in range(5)])
    client.batches.cancel(early.id)
    early = wait_openai(client, early.id)
    assert early.status == "cancelled" and early.request_counts.completed == 0
    after = stats_of(slow)["batch"]
    assert after["cancelled"] - before["cancelled"] == 2
    assert after["cancelled_requests"] - before["cancelled_requests"] >= 30 - done


def test_openai_batch_past_its_window_expires(short_window) -> None:
    client = openai_client(short_window)
    batch = wait_openai(client, submit(client, [chat_body(i) for i in range(20)]).id)
    assert batch.status == "expired" and batch.expired_at
    done = batch.request_counts.completed
    assert 4 <= done <= 16  # about half: 1 s of a 2 s batch
    expired = file_lines(client, batch.error_file_id)
    assert len(file_lines(client, batch.output_file_id)) == done
    assert len(expired) == 20 - done
    assert {e["error"]["code"] for e in expired} == {"batch_expired"}


def test_forced_expiry_expires_every_request(start_sim_server) -> None:
    server = start_sim_server("--batch-expire", "--batch-delay-s", "0.3")
    oa, an = openai_client(server), anthropic_client(server)
    batch = wait_openai(oa, submit(oa, [chat_body(i) for i in range(5)]).id)
    assert batch.status == "expired" and batch.output_file_id is None
    assert len(file_lines(oa, batch.error_file_id)) == 5
    created = an.messages.batches.create(
        requests=[{"custom_id": f"m{i}", "params": message_params(i)} for i in range(4)]
    )
    ended = wait_anthropic(an, created.id)
    assert ended.request_counts.expired == 4 and ended.request_counts.succeeded == 0
    assert {r.result.type for r in an.messages.batches.results(created.id)} == {"expired"}
    assert stats_of(server)["batch"]["expired"] == 2


# --------------------------------------------------------------------------- Anthropic


def test_anthropic_batch_answers_as_live_calls_do_with_partial_failures(quick) -> None:
    client = anthropic_client(quick)
    requests = [{"custom_id": f"m{i}", "params": message_params(i)} for i in range(30)]
    requests.append({"custom_id": "unknown", "params": message_params(30, model="sim/nope")})
    invalid = message_params(31)
    del invalid["max_tokens"]
    requests.append({"custom_id": "invalid", "params": invalid})
    created = client.messages.batches.create(requests=requests)
    assert created.processing_status == "in_progress" and created.results_url is None
    assert created.request_counts.processing == 32 and created.request_counts.succeeded == 0
    batch = wait_anthropic(client, created.id)

    counts = batch.request_counts
    assert counts.processing == 0 and counts.succeeded + counts.errored == 32
    assert counts.errored >= 3 and batch.ended_at and batch.results_url
    results = {r.custom_id: r.result for r in client.messages.batches.results(batch.id)}
    assert len(results) == 32
    assert results["unknown"].type == "errored"
    assert results["unknown"].error.error.type == "not_found_error"
    assert results["invalid"].error.error.type == "invalid_request_error"
    injected = [r for r in results.values() if r.type == "errored"]
    assert {r.error.error.type for r in injected} == {
        "not_found_error",
        "invalid_request_error",
        "api_error",
    }
    succeeded = {cid: r.message for cid, r in results.items() if r.type == "succeeded"}
    assert len(succeeded) == counts.succeeded
    for custom_id, message in list(succeeded.items())[:5]:
        params = message_params(int(custom_id.removeprefix("m")))
        live = client.messages.create(
            model=params["model"],
            max_tokens=params["max_tokens"],
            messages=params["messages"],
            extra_body={"itemeval_sim": params["itemeval_sim"]},
        )
        assert message.content[0].text == live.content[0].text
        assert message.usage.output_tokens == live.usage.output_tokens
        assert message.usage.service_tier == "batch" and live.usage.service_tier == "standard"

    with pytest.raises(anthropic.BadRequestError, match="duplicate"):
        client.messages.batches.create(requests=[requests[0], requests[0]])
    with pytest.raises(anthropic.BadRequestError, match="custom_id"):
        client.messages.batches.create(requests=[{"custom_id": "no spaces", "params": invalid}])


def test_anthropic_cancel_list_and_delete(slow) -> None:
    client = anthropic_client(slow)
    requests = [{"custom_id": f"c{i}", "params": message_params(i)} for i in range(30)]
    batch = client.messages.batches.create(requests=requests)
    with pytest.raises(urllib.error.HTTPError) as early:  # no results before the end
        urllib.request.urlopen(f"{slow.url}/v1/messages/batches/{batch.id}/results", timeout=10)
    assert early.value.code == 404
    with pytest.raises(anthropic.BadRequestError, match="cancel it"):
        client.messages.batches.delete(batch.id)
    time.sleep(1.0)
    cancelling = client.messages.batches.cancel(batch.id)
    assert cancelling.processing_status == "canceling" and cancelling.cancel_initiated_at
    ended = wait_anthropic(client, batch.id)
    counts = ended.request_counts
    assert counts.succeeded > 0 and counts.canceled > 0
    assert counts.succeeded + counts.canceled == 30
    kinds = [r.result.type for r in client.messages.batches.results(batch.id)]
    assert (
        kinds.count("canceled") == counts.canceled and kinds.count("succeeded") == counts.succeeded
    )

    # Cancelled right after creation: it still ends, its requests cancelled.
    instant = client.messages.batches.create(requests=requests)
    client.messages.batches.cancel(instant.id)
    instant_counts = wait_anthropic(client, instant.id).request_counts
    assert instant_counts.canceled > 0
    assert instant_counts.canceled + instant_counts.succeeded == 30

    others = [client.messages.batches.create(requests=requests[:1]).id for _ in range(2)]
    listed = [b.id for b in client.messages.batches.list(limit=1)]  # follows the pages
    assert listed[:4] == [*others[::-1], instant.id, batch.id]
    page = client.messages.batches.list(limit=1, after_id=others[1])
    assert [b.id for b in page.data] == [others[0]] and page.has_more
    assert client.messages.batches.delete(batch.id).type == "message_batch_deleted"
    with pytest.raises(anthropic.NotFoundError):
        client.messages.batches.retrieve(batch.id)


def test_anthropic_batch_past_its_window_expires(short_window) -> None:
    client = anthropic_client(short_window)
    requests = [{"custom_id": f"e{i}", "params": message_params(i)} for i in range(20)]
    batch = wait_anthropic(client, client.messages.batches.create(requests=requests).id)
    counts = batch.request_counts
    assert counts.expired > 0 and counts.succeeded > 0
    assert counts.succeeded + counts.expired == 20
    kinds = [r.result.type for r in client.messages.batches.results(batch.id)]
    assert sorted(set(kinds)) == ["expired", "succeeded"]


# --------------------------------------------------------------------------- a restarted driver


DRIVER = textwrap.dedent(
    """
    import io, json, sys, time
    import anthropic, openai
    url = sys.argv[1]
    oa = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0)
    an = anthropic.Anthropic(base_url=url, api_key="x", max_retries=0)
    body = {"model": "sim/strong", "max_tokens": 20,
            "messages": [{"role": "user", "content": "Hi"}]}
    lines = [{"custom_id": f"d{i}", "method": "POST", "url": "/v1/chat/completions", "body": body}
             for i in range(10)]
    data = "\\n".join(json.dumps(line) for line in lines).encode()
    file_id = oa.files.create(file=("in.jsonl", io.BytesIO(data)), purpose="batch").id
    first = oa.batches.create(input_file_id=file_id, endpoint="/v1/chat/completions",
                              completion_window="24h")
    second = an.messages.batches.create(
        requests=[{"custom_id": f"d{i}", "params": body} for i in range(10)])
    print(first.id, second.id, flush=True)
    while True:  # polls until killed
        oa.batches.retrieve(first.id)
        an.messages.batches.retrieve(second.id)
        time.sleep(0.05)
    """
)


def test_a_driver_killed_mid_batch_is_replaced_by_one_that_polls_the_same_ids(slow) -> None:
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, slow.url], stdout=subprocess.PIPE, text=True
    )
    try:
        assert driver.stdout is not None
        openai_id, anthropic_id = driver.stdout.readline().split()
        time.sleep(0.5)
        assert driver.poll() is None
    finally:
        driver.kill()
        driver.wait(timeout=10)
    oa, an = openai_client(slow), anthropic_client(slow)
    assert oa.batches.retrieve(openai_id).status == "in_progress"
    batch = wait_openai(oa, openai_id)
    assert batch.status == "completed" and batch.request_counts.completed == 10
    assert {line["custom_id"] for line in file_lines(oa, batch.output_file_id)} == {
        f"d{i}" for i in range(10)
    }
    assert wait_anthropic(an, anthropic_id).request_counts.succeeded == 10
    results = list(an.messages.batches.results(anthropic_id))
    assert sorted(r.custom_id for r in results) == sorted(f"d{i}" for i in range(10))


def test_a_batch_cancelled_before_its_task_ever_ran_still_ends() -> None:
    from itemeval.simulator._anthropic_batches import AnthropicBatches
    from itemeval.simulator._batches import Batch, BatchItem
    from itemeval.simulator._server import SimServer

    async def main() -> Batch:
        server = SimServer()
        api = AnthropicBatches(server.batches)
        items = [BatchItem(f"x{i}", message_params(i)) for i in range(3)]
        batch = Batch("msgbatch_x", api, items, time.time(), time.time() + 60)
        server.batches.submit(batch)
        server.batches.cancel(batch)  # before the event loop ran the task at all
        for _ in range(100):
            if batch.ended:
                break
            await asyncio.sleep(0.01)
        return batch

    batch = asyncio.run(main())
    assert batch.outcome == "cancelled" and batch.canceled == 3
    assert [json.loads(line)["result"]["type"] for line in batch.lines] == ["canceled"] * 3

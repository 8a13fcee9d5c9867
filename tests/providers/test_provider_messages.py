"""Prompts with several messages (a system message and few-shot turns) on the three wire formats:
what each client puts on the wire, seen by a recording proxy in front of `itemeval sim-server`,
and what the server counted (every message's tokens)."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from itemeval.datasets import WorkItem
from itemeval.errors import ConfigError
from itemeval.providers import EndpointSettings, ModelRequest, SamplingParams, make_provider
from itemeval.simulator._engine import input_tokens
from itemeval.templates import load_template

FEWSHOT = """\
description: two worked examples before the question
messages:
  - role: system
    content: You add numbers. {{ task_prompt }}
  - role: user
    content: "What is 2 + 3?\\n\\n{{ answer_instructions }}"
  - role: assistant
    content: "5"
  - role: user
    content: "What is {10} + {20}?"
  - role: assistant
    content: "30"
  - role: user
    content: |
      {{ input }}

      {{ answer_instructions }}
"""

ITEM = WorkItem(
    id="q1",
    input="What is {x} + 4, where x = 3?",
    target="7",
    modality="single-value",
    task_prompt="Be brief.",
)
INSTRUCTION = "Answer with the final number only."


class RecordingProxy:
    """Forwards every request to the sim-server and keeps the JSON body it carried."""

    def __init__(self, upstream: str):
        self.upstream = upstream.rstrip("/")
        self.bodies: list[tuple[str, Any]] = []
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def __aenter__(self) -> RecordingProxy:
        app = web.Application()
        app.router.add_route("POST", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        await web.SockSite(self._runner, sock).start()
        self._session = aiohttp.ClientSession()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._session.close()
        assert self._runner is not None
        await self._runner.cleanup()

    async def _forward(self, request: web.Request) -> web.Response:
        raw = await request.read()
        self.bodies.append((request.path, json.loads(raw)))
        headers = {"Content-Type": "application/json"}
        url = self.upstream + request.path_qs
        async with self._session.post(url, data=raw, headers=headers) as answer:
            return web.Response(
                status=answer.status, body=await answer.read(), content_type="application/json"
            )


def _template(tmp_path: Path, text: str = FEWSHOT):
    (tmp_path / "fewshot.yaml").write_text(text)
    return load_template("fewshot", "prompt", tmp_path, field="facets.prompt[0]")


def test_a_messages_prompt_renders_every_message_brace_safe(tmp_path):
    template = _template(tmp_path)
    messages = template.render_prompt(ITEM)
    assert [m["role"] for m in messages] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    # The template places the task prompt itself, so it is not sent a second time.
    assert messages[0]["content"] == "You add numbers. Be brief."
    assert messages[1]["content"] == f"What is 2 + 3?\n\n{INSTRUCTION}"
    assert messages[3]["content"] == "What is {10} + {20}?"  # single braces stay text
    assert messages[5]["content"] == f"What is {{x}} + 4, where x = 3?\n\n{INSTRUCTION}"
    # Without a task prompt the system message keeps its own words.
    plain = template.render_prompt(WorkItem(id="q2", input="1 + 1?", target="2"))
    assert plain[0] == {"role": "system", "content": "You add numbers."}


def test_the_task_prompt_goes_first_when_the_template_does_not_place_it(tmp_path):
    template = _template(tmp_path, FEWSHOT.replace(" {{ task_prompt }}", ""))
    messages = template.render_prompt(ITEM)
    assert messages[0] == {"role": "system", "content": "Be brief."}
    assert messages[1] == {"role": "system", "content": "You add numbers."}


def _call(settings: EndpointSettings, messages: tuple[dict[str, str], ...]) -> Any:
    async def run() -> Any:
        provider = make_provider(settings)
        try:
            return await provider.complete(
                ModelRequest("sim/strong", messages, SamplingParams(max_tokens=64))
            )
        finally:
            await provider.aclose()

    return run()


@pytest.mark.parametrize("wire", ["openai", "anthropic", "gemini"])
def test_each_wire_sends_the_system_message_and_alternating_turns(wire, tmp_path, start_sim_server):
    server = start_sim_server()
    messages = _template(tmp_path, FEWSHOT.replace(" {{ task_prompt }}", "")).render_prompt(ITEM)
    root = {"openai": "/v1", "anthropic": "", "gemini": "/v1beta"}[wire]

    async def scenario() -> tuple[Any, list[tuple[str, Any]]]:
        async with RecordingProxy(server.url) as proxy:
            settings = EndpointSettings(kind=wire, base_url=proxy.url + root)
            result = await _call(settings, messages)
            return result, proxy.bodies

    result, bodies = asyncio.run(scenario())
    assert result.ok, result.error_message
    [(path, body)] = bodies
    user_final = f"What is {{x}} + 4, where x = 3?\n\n{INSTRUCTION}"
    if wire == "openai":
        assert path == "/v1/chat/completions"
        assert body["messages"] == list(messages)  # two system messages, then the turns
        sent = body["messages"]
    elif wire == "anthropic":
        assert path == "/v1/messages"
        assert body["system"] == "Be brief.\n\nYou add numbers."
        assert [m["role"] for m in body["messages"]] == [
            "user", "assistant", "user", "assistant", "user",
        ]  # fmt: skip
        assert body["messages"][1] == {"role": "assistant", "content": "5"}
        assert body["messages"][-1] == {"role": "user", "content": user_final}
        sent = [{"role": "system", "content": body["system"]}, *body["messages"]]
    else:
        assert path == "/v1beta/models/sim/strong:generateContent"
        assert body["systemInstruction"] == {"parts": [{"text": "Be brief.\n\nYou add numbers."}]}
        assert [c["role"] for c in body["contents"]] == ["user", "model", "user", "model", "user"]
        assert body["contents"][3]["parts"] == [{"text": "30"}]
        assert body["contents"][-1]["parts"] == [{"text": user_final}]
        sent = [
            {"role": "system", "content": body["systemInstruction"]["parts"][0]["text"]},
            *({"role": c["role"], "content": c["parts"][0]["text"]} for c in body["contents"]),
        ]
    # The server billed every message it received: the few-shot turns reached the model.
    assert result.usage.input_tokens == input_tokens(sent)
    assert result.usage.input_tokens > input_tokens([{"role": "user", "content": user_final}]) + 20


def test_consecutive_turns_of_one_role_are_joined_for_anthropic_and_gemini():
    from itemeval.providers._anthropic_messages import alternating

    turns = alternating(
        [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "a"},
            {"role": "user", "content": "b"},
            {"role": "assistant", "content": "c"},
            {"role": "user", "content": "d"},
        ]
    )
    assert turns == [("user", "a\n\nb"), ("assistant", "c"), ("user", "d")]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("messages: []\n", "messages must be a non-empty list"),
        ("prompt: hi\n", "a YAML prompt is a mapping with a `messages:` list"),
        ("messages:\n  - role: robot\n    content: hi\n", "role 'robot' is not one of"),
        ("messages:\n  - role: user\n    content: 5\n", "content must be text, not int"),
        (
            "messages:\n  - role: user\n    content: a\n  - role: system\n    content: b\n"
            "  - role: user\n    content: c\n",
            "a system message after the conversation started",
        ),
        (
            "messages:\n  - role: user\n    content: a\n  - role: user\n    content: b\n",
            "expected a assistant message here",
        ),
        (
            "messages:\n  - role: user\n    content: a\n  - role: assistant\n    content: b\n",
            "the last message must be the user's",
        ),
        ("messages:\n  - role: user\n    content: '{{ target }}'\n", "unknown template field"),
        ("messages:\n  - role: user\n    content: [\n", "invalid YAML"),
    ],
)
def test_a_bad_messages_file_names_the_file_line_and_message(tmp_path, text, message):
    (tmp_path / "bad.yaml").write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_template("bad", "prompt", tmp_path, field="facets.prompt[0]")
    shown = str(caught.value)
    assert message in shown and "bad.yaml" in shown and "facets.prompt[0]" in shown


def test_a_wrong_role_is_reported_at_its_line(tmp_path):
    text = "messages:\n  - role: user\n    content: a\n  - role: user\n    content: b\n"
    (tmp_path / "bad.yaml").write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_template("bad", "prompt", tmp_path)
    assert "bad.yaml:4" in str(caught.value) and "messages[1].role" in str(caught.value)


def test_a_name_with_both_a_text_and_a_yaml_file_is_ambiguous(tmp_path):
    (tmp_path / "p.txt").write_text("{{ input }}")
    (tmp_path / "p.yaml").write_text("messages:\n  - role: user\n    content: '{{ input }}'\n")
    with pytest.raises(ConfigError, match="ambiguous"):
        load_template("p", "prompt", tmp_path)


def test_the_file_is_the_identity(tmp_path):
    first = _template(tmp_path)
    edited = _template(tmp_path, FEWSHOT.replace('content: "5"', 'content: "five"'))
    assert first.sha256 != edited.sha256
    assert "[assistant]\n5" in first.text  # what exports show as the prompt template

"""Prompt files with several messages: a system message and few-shot turns, as YAML.

    # prompts/fewshot.yaml
    messages:
      - role: system
        content: You are a careful assistant. {{ task_prompt }}
      - role: user
        content: "What is 2 + 3?\\n\\nAnswer with the final number only."
      - role: assistant
        content: "5"
      - role: user
        content: |
          {{ input }}

          {{ answer_instructions }}

The rules, checked when the study loads (errors name the file, the line and the message):

* the file is a mapping with `messages` (and optionally a `description`, for readers);
* each message has exactly a `role` (system, user or assistant) and a `content` string;
* system messages come first; then the turns alternate user, assistant, user, ... and end
  with a user message (what the model answers), the order every provider accepts;
* every message is rendered with the same fields and renderer as a text prompt.
"""

from __future__ import annotations

from typing import Any

import yaml

from itemeval._util.yaml_lines import YamlLines, safe_load
from itemeval.errors import ConfigError, Problem
from itemeval.render import check

ROLES = ("system", "user", "assistant")
_KEYS = {"messages", "description"}

#: (role, template text) of each message, in order.
MessageTemplates = tuple[tuple[str, str], ...]


def load_yaml(text: str, source: str, field: str | None = None) -> Any:
    """The data of a YAML text; invalid YAML is a `ConfigError` naming `source` and the line."""
    try:
        return safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ConfigError(
            Problem(
                f"invalid YAML: {getattr(exc, 'problem', exc)}",
                file=source,
                line=mark.line + 1 if mark else None,
                field=field,
            )
        ) from None


def parse_messages(raw: str, source: str, allowed: frozenset[str], field: str) -> MessageTemplates:
    """The messages of a YAML prompt file, checked (see the module doc); `ConfigError` names
    `source`, the line and the message's place in the file."""
    lines = YamlLines(raw)

    def problem(message: str, where: str | None = None, hint: str | None = None) -> ConfigError:
        return ConfigError(
            Problem(
                f"{where}: {message}" if where else message,
                file=source,
                line=lines.line_of(where) if where else None,
                field=field,
                hint=hint,
            )
        )

    data = load_yaml(raw, source, field)
    if not isinstance(data, dict) or "messages" not in data:
        raise problem(
            "a YAML prompt is a mapping with a `messages:` list",
            hint="see docs/study.md, 'Prompts with several messages'",
        )
    unknown = sorted(str(k) for k in data if k not in _KEYS)
    if unknown:
        hint = "valid keys: description, messages"
        raise problem(f"unknown key(s) {', '.join(unknown)}", unknown[0], hint=hint)
    if data.get("description") is not None and not isinstance(data["description"], str):
        raise problem("description must be text", "description")
    entries = data["messages"]
    if not isinstance(entries, list) or not entries:
        raise problem("messages must be a non-empty list", "messages")

    out: list[tuple[str, str]] = []
    for index, entry in enumerate(entries):
        where = f"messages[{index}]"
        if not isinstance(entry, dict):
            raise problem("a message is a mapping with `role` and `content`", where)
        extra = sorted(str(k) for k in entry if k not in ("role", "content"))
        if extra:
            raise problem(f"unknown key(s) {', '.join(extra)}", f"{where}.{extra[0]}")
        role, content = entry.get("role"), entry.get("content")
        if role not in ROLES:
            raise problem(
                f"role {role!r} is not one of {', '.join(ROLES)}",
                f"{where}.role" if "role" in entry else where,
            )
        if not isinstance(content, str):
            shown = (
                "is missing"
                if "content" not in entry
                else f"must be text, not {type(content).__name__}"
            )
            raise problem(
                f"content {shown}",
                f"{where}.content" if "content" in entry else where,
                hint="quote it ('5') so that YAML reads it as text",
            )
        bad = check(content, allowed)
        if bad:
            raise problem(
                f"unknown template field(s) {', '.join('{{ ' + b + ' }}' for b in bad)}",
                f"{where}.content",
                hint=f"prompt templates may use: {', '.join(sorted(allowed))}",
            )
        out.append((role, content))

    _check_order(out, problem)
    return tuple(out)


def _check_order(messages: list[tuple[str, str]], problem: Any) -> None:
    """System messages first; then user/assistant alternating, from a user turn to a user turn."""
    turns = [(i, role) for i, (role, _) in enumerate(messages) if role != "system"]
    first_turn = turns[0][0] if turns else len(messages)
    for index, (role, _) in enumerate(messages):
        if role == "system" and index > first_turn:
            raise problem(
                "a system message after the conversation started",
                f"messages[{index}]",
                hint="put system messages first (providers take one system prompt)",
            )
    if not turns:
        raise problem("there is no user message", "messages", hint="end with the user's turn")
    for position, (index, role) in enumerate(turns):
        expected = "user" if position % 2 == 0 else "assistant"
        if role != expected:
            raise problem(
                f"expected a {expected} message here: turns alternate user, assistant, user, ...",
                f"messages[{index}].role",
            )
    if turns[-1][1] != "user":
        raise problem(
            "the last message must be the user's (the model answers it)",
            f"messages[{turns[-1][0]}]",
        )


def display_text(messages: MessageTemplates) -> str:
    """The messages as one readable text (`[system]`, `[user]`, ... headers)."""
    return "\n\n".join(f"[{role}]\n{text.strip()}" for role, text in messages)

"""Prompt and rubric templates: loading, content hashes, and rendering into chat messages.

Two namespaces that never collide:

* `builtin:NAME`: shipped in the package (`itemeval/templates/builtin/{prompts,rubrics}/NAME.txt`);
* `NAME`: a local file `<prompts_dir>/NAME.txt` or `<rubrics_dir>/NAME.txt` next to the study
  (`.md` is accepted too); a prompt may also be `NAME.yaml` (or `.yml`) with several messages, a
  system message and few-shot turns (`templates/_messages.py`).

A rubric may start with a front-matter block (`---`, `max_score: 10`, `pass_score: 5`, `---`;
also `min_score`, default 0) that says how its scores read: a judge score outside
`[min_score, max_score]` fails as `score_out_of_range`. Templates use `itemeval.render`
(`{{ name }}`, brace-safe). Each template carries a `sha256` over everything that reaches the
model through it (its file's text, and for prompts the answer-instruction texts, for rubrics the
judge format suffix), which enters condition ids.

An item's task prompt is sent as the first system message. A text prompt always does so; a
messages prompt does so unless it places `{{ task_prompt }}` itself (then it is where the
template puts it, and a system message that renders empty is left out).

The public names are `__all__` below; `_answer_formats` (the answer instructions per modality)
and `_messages` (multi-message prompt files) are private.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml

from itemeval._util.yaml_lines import safe_load
from itemeval.datasets import WorkItem
from itemeval.errors import ConfigError, Problem
from itemeval.ids import sha256_hex
from itemeval.render import TemplateFieldError, check, placeholders, render
from itemeval.templates._answer_formats import ANSWER_TEXTS_HASH, LETTERS, answer_kind, answer_texts
from itemeval.templates._messages import MessageTemplates, display_text, parse_messages

__all__ = [
    "BUILTIN_PREFIX",
    "LETTERS",
    "PAIRWISE_FORMAT",
    "PROMPT_FIELDS",
    "RUBRIC_FIELDS",
    "Kind",
    "Template",
    "answer_kind",
    "builtin_names",
    "judge_format_suffix",
    "load_template",
    "render_pairwise",
]

Kind = Literal["prompt", "rubric"]

BUILTIN_PREFIX = "builtin:"

#: Fields a prompt template may use. The target is deliberately absent: a prompt never sees it.
PROMPT_FIELDS = frozenset(
    {
        "input",
        "id",
        "dataset",
        "modality",
        "task_prompt",
        "difficulty",
        "metadata",
        "answer_instructions",
        "answer_format",
        "choice_letters",
    }
)
#: Fields a rubric template may use.
RUBRIC_FIELDS = frozenset(
    {
        "input",
        "target",
        "response",
        "grading_scheme",
        "id",
        "dataset",
        "modality",
        "task_prompt",
        "metadata",
    }
)

_JUDGE_SYSTEM = "You are an impartial, exacting grader."


def _builtin_dir(kind: Kind) -> Any:
    return resources.files("itemeval.templates").joinpath("builtin", f"{kind}s")


def judge_format_suffix() -> str:
    """The packaged instruction that makes judges end with the fenced JSON score contract."""
    path = resources.files("itemeval.templates").joinpath("builtin", "judge_format.txt")
    return path.read_text(encoding="utf-8").strip()


def builtin_names(kind: Kind) -> list[str]:
    return sorted(
        BUILTIN_PREFIX + entry.name.rsplit(".", 1)[0]
        for entry in _builtin_dir(kind).iterdir()
        if entry.name.endswith(".txt")
    )


@dataclass(frozen=True, slots=True)
class Template:
    """A loaded template: its name, text, where it came from, and its content hash."""

    name: str
    kind: Kind
    text: str
    sha256: str
    source: str
    max_score: float = 1.0
    pass_score: float = 1.0
    min_score: float = 0.0
    #: A messages prompt's (role, template) pairs; empty for a text template (one user message).
    messages: MessageTemplates = ()

    @property
    def short_name(self) -> str:
        """The name without the `builtin:` prefix (used in condition slugs)."""
        return self.name.removeprefix(BUILTIN_PREFIX)

    # -- rendering -------------------------------------------------------------------------
    def render_prompt(self, item: WorkItem) -> tuple[dict[str, str], ...]:
        """Chat messages for a solver: the item's effective task prompt as the system message
        (when it has one), the rendered template as the user message."""
        instructions, answer_format, letters = answer_texts(item.modality, item.target)
        values = {
            "input": item.input,
            "id": item.id,
            "dataset": item.dataset,
            "modality": item.modality or "",
            "task_prompt": item.task_prompt or "",
            "difficulty": "" if item.difficulty is None else item.difficulty,
            "metadata": item.metadata,
            "answer_instructions": instructions,
            "answer_format": answer_format,
            "choice_letters": letters,
        }
        if self.messages:
            return self._render_messages(item, values)
        user = render(self.text, values).strip()
        if item.task_prompt:
            return (
                {"role": "system", "content": item.task_prompt},
                {"role": "user", "content": user},
            )
        return ({"role": "user", "content": user},)

    def _render_messages(
        self, item: WorkItem, values: dict[str, Any]
    ) -> tuple[dict[str, str], ...]:
        out: list[dict[str, str]] = []
        if item.task_prompt and not self.places_task_prompt:
            out.append({"role": "system", "content": item.task_prompt})
        for role, text in self.messages:
            content = render(text, values).strip()
            if role == "system" and not content:
                continue  # e.g. `{{ task_prompt }}` alone, for an item without one
            out.append({"role": role, "content": content})
        return tuple(out)

    @property
    def places_task_prompt(self) -> bool:
        """A messages prompt that says where the item's task prompt goes."""
        return any("task_prompt" in placeholders(text) for _, text in self.messages)

    def render_rubric(self, item: WorkItem, response: str) -> tuple[dict[str, str], ...]:
        """Chat messages for a judge: the rendered rubric followed by the judge format suffix."""
        body = render(self.text, _rubric_values(item, response)).strip()
        return (
            {"role": "system", "content": _JUDGE_SYSTEM},
            {"role": "user", "content": body + "\n\n" + judge_format_suffix()},
        )


def _rubric_values(item: WorkItem, response: str) -> dict[str, object]:
    """What a judge's rubric may name: the item's fields and the response it judges."""
    return {
        "input": item.input,
        "target": item.target,
        "response": response,
        "grading_scheme": item.grading_scheme or "",
        "id": item.id,
        "dataset": item.dataset,
        "modality": item.modality or "",
        "task_prompt": item.task_prompt or "",
        "metadata": item.metadata,
    }


PAIRWISE_FORMAT = (
    "Two responses to the task follow, the first and then the second. Judge which one is "
    "better by the criteria above, not by its length or its position. End your reply with a "
    'fenced JSON block: ```json\n{"reasoning": "<why>", "winner": "first" | "second" | '
    '"tie"}\n```'
)


def render_pairwise(
    template: Template, item: WorkItem, first: str, second: str
) -> tuple[dict[str, str], ...]:
    """Chat messages for a pairwise judge: the rubric (its `{response}` says the responses
    follow), then the two responses in the order shown, then the verdict format."""
    body = render(template.text, _rubric_values(item, "(the two responses below)")).strip()
    return (
        {"role": "system", "content": _JUDGE_SYSTEM},
        {
            "role": "user",
            "content": f"{body}\n\n{PAIRWISE_FORMAT}\n\n[First response]\n{first}\n\n"
            f"[Second response]\n{second}",
        },
    )


def _split_front_matter(text: str, source: str) -> tuple[dict[str, Any], str]:
    if not text.startswith("---\n"):
        return {}, text
    end = text.find("\n---\n", 4)
    if end < 0:
        raise ConfigError(Problem("front matter starts with '---' but never ends", file=source))
    try:
        meta = safe_load(text[4:end]) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(Problem(f"front matter is not valid YAML: {exc}", file=source)) from None
    if not isinstance(meta, dict) or set(meta) - {"min_score", "max_score", "pass_score"}:
        raise ConfigError(
            Problem(
                "front matter may only set min_score, max_score and pass_score",
                file=source,
                hint="remove other keys from the block between the --- lines",
            )
        )
    return meta, text[end + 5 :]


def _inside(path: Path, folder: Path) -> bool:
    """True when `path`, with every `..` and symbolic link resolved, is in `folder`."""
    return path.resolve().is_relative_to(folder.resolve())


def _outside(name: str, kind: Kind, folder: Path | None, field: str) -> ConfigError:
    where = f"the {kind}s folder {folder}" if folder is not None else f"the built-in {kind}s"
    return ConfigError(
        Problem(
            f"{kind} template {name!r} is outside {where}",
            field=field,
            hint=f"name a file inside that folder (a sub-folder is fine: `shared/{kind}`), "
            "without `..`, an absolute path or a link that leads out of it",
        )
    )


def _check_name(name: str, kind: Kind, local_dir: Path | None, field: str) -> None:
    """A template name is a path inside its folder: no absolute path, no `..` component (a
    built-in name is one plain name). Links that lead out are caught once the file is found."""
    builtin = name.startswith(BUILTIN_PREFIX)
    short = name.removeprefix(BUILTIN_PREFIX)
    parts = re.split(r"[/\\]", short)
    escapes = not short or short.startswith(("/", "\\", "~")) or ".." in parts
    if (builtin and len(parts) > 1) or escapes or re.match(r"^[A-Za-z]:", short):
        raise _outside(name, kind, None if builtin else local_dir, field)


def load_template(
    name: str, kind: Kind, local_dir: Path | None = None, *, field: str = ""
) -> Template:
    """Load `builtin:NAME` from the package or `NAME` from `local_dir`, checking its fields."""
    _check_name(name, kind, local_dir, field)
    if name.startswith(BUILTIN_PREFIX):
        short = name.removeprefix(BUILTIN_PREFIX)
        entry = _builtin_dir(kind).joinpath(f"{short}.txt")
        if not entry.is_file():
            available = builtin_names(kind)
            close = difflib.get_close_matches(name, available, n=1)
            raise ConfigError(
                Problem(
                    f"there is no built-in {kind} template {name!r}",
                    field=field,
                    hint=(f"did you mean {close[0]!r}? " if close else "")
                    + f"built-in {kind}s: {', '.join(available)}",
                )
            )
        raw = entry.read_text(encoding="utf-8")
        source = f"package:itemeval/templates/builtin/{kind}s/{short}.txt"
    else:
        if local_dir is None:
            raise ConfigError(
                Problem(f"local {kind} template {name!r} needs a study file", field=field)
            )
        suffixes = (".txt", ".md", ".yaml", ".yml") if kind == "prompt" else (".txt", ".md")
        candidates = [local_dir / f"{name}{suffix}" for suffix in suffixes]
        found = [c for c in candidates if c.is_file()]
        if kind == "rubric" and not found and (local_dir / f"{name}.yaml").is_file():
            raise ConfigError(
                Problem(
                    f"rubric {name!r} is a YAML file: rubrics are text files (.txt or .md)",
                    file=str(local_dir / f"{name}.yaml"),
                    field=field,
                )
            )
        if len(found) > 1 and any(c.suffix in (".yaml", ".yml") for c in found):
            raise ConfigError(
                Problem(
                    f"{kind} template {name!r} is ambiguous: " + ", ".join(str(c) for c in found),
                    field=field,
                    hint="keep one file per name",
                )
            )
        path = found[0] if found else None
        if path is not None and not _inside(path, local_dir):
            raise _outside(name, kind, local_dir, field)
        if path is None:
            raise ConfigError(
                Problem(
                    f"{kind} template {name!r} not found: looked for {candidates[0]}"
                    + (" (or .md, .yaml, .yml)" if kind == "prompt" else " (or .md)"),
                    field=field,
                    hint="create that file, or use a built-in one: "
                    + ", ".join(builtin_names(kind)),
                )
            )
        try:
            raw = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise ConfigError(
                Problem("template is not UTF-8 text", file=str(path), field=field)
            ) from None
        source = str(path)

    allowed = PROMPT_FIELDS if kind == "prompt" else RUBRIC_FIELDS
    if source.endswith((".yaml", ".yml")):
        messages = parse_messages(raw, source, allowed, field)
        return Template(
            name=name,
            kind=kind,
            text=display_text(messages),
            sha256=sha256_hex(raw + "\x00" + ANSWER_TEXTS_HASH),
            source=source,
            messages=messages,
        )
    meta, body = _split_front_matter(raw, source)
    unknown = check(body, allowed)
    if unknown:
        raise ConfigError(
            Problem(
                f"unknown template field(s) {', '.join('{{ ' + u + ' }}' for u in unknown)}",
                file=source,
                field=field,
                hint=f"{kind} templates may use: {', '.join(sorted(allowed))}",
            )
        )
    if kind == "rubric" and "response" not in placeholders(body):
        raise ConfigError(
            Problem(
                "a rubric must show the judge the response: it has no {{ response }} field",
                file=source,
                field=field,
            )
        )
    if kind == "prompt":
        digest = sha256_hex(raw + "\x00" + ANSWER_TEXTS_HASH)
    else:
        digest = sha256_hex(raw + "\x00" + _JUDGE_SYSTEM + "\x00" + judge_format_suffix())
    min_score, max_score, pass_score = _score_range(meta, source)
    return Template(
        name=name,
        kind=kind,
        text=body,
        sha256=digest,
        source=source,
        max_score=max_score,
        pass_score=pass_score,
        min_score=min_score,
    )


def _score_range(meta: dict[str, Any], source: str) -> tuple[float, float, float]:
    """`(min_score, max_score, pass_score)` from a rubric's front matter, checked."""
    try:
        max_score = float(meta.get("max_score", 1.0))
        min_score = float(meta.get("min_score", 0.0))
        pass_score = float(meta.get("pass_score", max_score))
    except (TypeError, ValueError):
        raise ConfigError(
            Problem("min_score, max_score and pass_score must be numbers", file=source)
        ) from None
    if not min_score < max_score or not min_score <= pass_score <= max_score:
        raise ConfigError(
            Problem(
                f"scores must satisfy min_score < max_score and min_score <= pass_score <= "
                f"max_score (found {min_score:g}, {max_score:g}, {pass_score:g})",
                file=source,
            )
        )
    return min_score, max_score, pass_score


__all__ = [
    "BUILTIN_PREFIX",
    "PROMPT_FIELDS",
    "RUBRIC_FIELDS",
    "Template",
    "TemplateFieldError",
    "builtin_names",
    "judge_format_suffix",
    "load_template",
]

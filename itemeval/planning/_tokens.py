"""The estimate's prior: tokens counted from the real prompts, before any call.

Every item is rendered through every prompt template and counted at about four characters a
token (no tokenizer download, ever).
Output tokens follow the answer the prompt asks for (a letter is a few tokens, a chain of thought
about two hundred), plus a reasoning allowance when a reasoning effort or thinking budget is set,
capped by `max_tokens`. A judge call is the rubric rendered for the item plus the judged answer's
visible tokens.

Counts depend on the prompt and the output-length parameters, not on the model: each distinct
solver shape (`solver_shape`) is rendered once per item. `token_tables` does it in one pass over
the items and keeps per-item counts as compact numpy columns (`TokenColumns`); `estimate.py`
prices them and `calibration.py` corrects them from reported usage.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import pyarrow as pa

from itemeval.datasets import WorkItem
from itemeval.errors import ConfigError, Problem, TemplateFieldError
from itemeval.planning._calibration import Priors
from itemeval.planning._design import Design, GenerateCondition
from itemeval.providers.types import SamplingParams
from itemeval.templates import Template
from itemeval.templates._answer_formats import answer_kind

CHARS_PER_TOKEN = 4.0
MESSAGE_OVERHEAD_TOKENS = 4

#: Expected visible output tokens by answer shape, for direct answers.
_DIRECT_OUTPUT = {
    "choice": 3,
    "boolean": 3,
    "ternary": 5,
    "number": 6,
    "cloze": 6,
    "word": 6,
    "short": 16,
    "long": 160,
    "free": 120,
}
_CHAIN_OF_THOUGHT_OUTPUT = 220
JUDGE_OUTPUT = 70
_REASONING_ALLOWANCE = {"minimal": 64, "low": 512, "medium": 2048, "high": 8192}


def count_tokens(text: str) -> int:
    return max(1, round(len(text) / CHARS_PER_TOKEN))


def message_tokens(messages: Iterable[dict[str, str]]) -> int:
    return sum(count_tokens(m["content"]) + MESSAGE_OVERHEAD_TOKENS for m in messages)


def expected_tokens(prompt: Template, item: WorkItem, params: SamplingParams) -> tuple[int, int]:
    """The prior: (output tokens with hidden reasoning, visible output tokens) of one call."""
    if "ANSWER:" in prompt.text:
        visible = _CHAIN_OF_THOUGHT_OUTPUT
    else:
        visible = _DIRECT_OUTPUT[answer_kind(item.modality, item.target)]
    hidden = 0
    if params.reasoning_effort:
        hidden = _REASONING_ALLOWANCE[params.reasoning_effort]
    elif params.thinking_budget:
        hidden = params.thinking_budget // 2
    total = visible + hidden
    if params.max_tokens:  # reasoning comes first: the visible part is what is left
        return min(total, params.max_tokens), max(0, min(total, params.max_tokens) - hidden)
    return total, visible


def solver_shape(cond: GenerateCondition) -> tuple[str, int | None, str | None, int | None]:
    params = cond.params
    return (cond.prompt.name, params.max_tokens, params.reasoning_effort, params.thinking_budget)


class TokenColumns:
    """Per-item numbers built batch by batch (compact numpy chunks), read as whole arrays."""

    def __init__(self, *names: str) -> None:
        self._chunks: dict[str, list[np.ndarray]] = {name: [] for name in names}
        self._whole: dict[str, np.ndarray] = {}

    def add(self, **values: list[int] | np.ndarray) -> None:
        for name, chunk in values.items():
            self._chunks[name].append(np.asarray(chunk, dtype=np.int32))
            self._whole.pop(name, None)

    def settle(self) -> None:
        """Merge every column's chunks now (reading one merges it otherwise), so that the
        chunks' pages are free before the caller hands free pages back."""
        for name in self._chunks:
            self[name]

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._whole:
            chunks = self._chunks[name]
            self._whole[name] = np.concatenate(chunks) if chunks else np.zeros(0, np.int32)
            self._chunks[name] = [self._whole[name]]  # the chunks are not kept twice
        return self._whole[name]


@dataclass
class TokenTables:
    """Per-item prior token counts, aligned with the selected items: one set per distinct solver
    shape (prompt and output-length parameters), the rubric's own tokens per judge, and each
    item's modality. Built in one pass over the items."""

    items: int = 0
    generate: dict[tuple, TokenColumns] = field(default_factory=dict)
    judge: dict[str, TokenColumns] = field(default_factory=dict)
    modalities: dict[str, int] = field(default_factory=dict)  # name -> code
    _meta: TokenColumns = field(default_factory=lambda: TokenColumns("modality"))
    #: The selected items' ids, in the same order: the planner's item index lends its column.
    item_ids: pa.Array = field(default_factory=lambda: pa.array([], pa.string()))

    @property
    def modality(self) -> np.ndarray:
        return self._meta["modality"]

    def settle(self) -> None:
        """Every column merged from its chunks (see `TokenColumns.settle`)."""
        for columns in [self._meta, *self.generate.values(), *self.judge.values()]:
            columns.settle()

    def priors(self, design: Design) -> Priors:
        """The per-item priors by condition id, for `calibration.calibrate`."""
        generate = {}
        for cond in design.generate:
            counts = self.generate[solver_shape(cond)]
            generate[cond.id] = (counts["input"], counts["output"], counts["visible"])
        return Priors(
            item_ids=self.item_ids,
            modality=self.modality,
            generate=generate,
            judge_input={j.id: self.judge[j.id]["input"] for j in design.judges},
            judge_output={j.id: np.full(self.items, JUDGE_OUTPUT, np.int32) for j in design.judges},
        )


def token_tables(design: Design, batches: Iterable[list[WorkItem]]) -> TokenTables:
    """Render every item through every prompt (and rubric) once and count tokens."""
    # Token counts depend on the prompt and the output-length parameters, not on the model, so
    # each distinct shape is rendered once per item, whatever the number of models.
    shapes = {solver_shape(c): c for c in reversed(design.generate)}
    tables = TokenTables(
        generate={shape: TokenColumns("input", "output", "visible") for shape in shapes},
        judge={j.id: TokenColumns("input") for j in design.judges},
    )
    for batch in batches:
        tables.items += len(batch)
        codes = tables.modalities
        tables._meta.add(
            modality=[codes.setdefault(item.modality or "", len(codes)) for item in batch]
        )
        for shape, cond in shapes.items():
            expected = [expected_tokens(cond.prompt, item, cond.params) for item in batch]
            tables.generate[shape].add(
                input=_rendered(cond.prompt, cond.prompt.render_prompt, batch, "facets.prompt"),
                output=[total for total, _ in expected],
                visible=[visible for _, visible in expected],
            )
        for judge in design.judges:
            assert judge.rubric is not None
            # The rubric without the response; the judged answer's tokens are added per
            # generate condition (prior or calibrated) when the estimate is built.
            rubric = judge.rubric
            tables.judge[judge.id].add(
                input=_rendered(
                    rubric, partial(rubric.render_rubric, response=""), batch, "facets.rubric"
                )
            )
    return tables


def _rendered(
    template: Template,
    render: Callable[[WorkItem], Iterable[dict[str, str]]],
    batch: list[WorkItem],
    field: str,
) -> list[int]:
    """The tokens of each item's rendered messages; a placeholder an item does not have (a
    misspelled `{{ metadata.key }}`) is a `ConfigError` naming the template, the item and the
    nearest name, before anything is sent."""
    try:
        return [message_tokens(render(item)) for item in batch]
    except TemplateFieldError as error:
        item = next(i for i in batch if _fails(render, i))
        close = difflib.get_close_matches(error.name, error.available, n=1, cutoff=0.6)
        hint = f"did you mean {{{{ {close[0]} }}}}? " if close else ""
        raise ConfigError(
            Problem(
                f"template {template.name} names {{{{ {error.name} }}}}, which item {item.id} "
                "does not have",
                file=template.source,
                field=field,
                hint=f"{hint}the item's fields: {', '.join(error.available[:30])} (every item "
                "a run selects must have the metadata keys its templates name)",
            )
        ) from None


def _fails(render: Callable[[WorkItem], object], item: WorkItem) -> bool:
    try:
        render(item)
    except TemplateFieldError:
        return True
    return False

"""What a shard's cells ask a model: prompts and rubrics rendered into `ModelRequest`s.

One place for the live path (`worker.py`) and the batch tier (`runtime/batch/`), so a request
sent in a batch is the request a live call would send (same messages, parameters and hints, so
the same response-cache key).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from itemeval.datasets import WorkItem
from itemeval.judging._pairwise import PAIRWISE_SCHEMA
from itemeval.planning import GenerateCondition, GradeCondition
from itemeval.providers import EndpointSettings
from itemeval.providers.types import ModelRequest, ReplySchema
from itemeval.scoring import VERDICT_SCHEMA, VERDICT_SCHEMA_NAME
from itemeval.templates import render_pairwise


def generate_requests(
    condition: GenerateCondition,
    endpoint: EndpointSettings,
    items: Mapping[str, WorkItem],
    item_ids: Sequence[str],
    epochs: Sequence[int],
) -> list[ModelRequest]:
    """One request per cell `(item_ids[i], epochs[i])`: the item rendered through the prompt."""
    sim = endpoint.kind == "sim"
    return [
        ModelRequest(
            model=condition.model_id,
            messages=condition.prompt.render_prompt(items[item_id]),
            params=condition.params,
            sim_hints=_solver_hints(items[item_id], epoch) if sim else None,
        )
        for item_id, epoch in zip(item_ids, epochs, strict=True)
    ]


def judge_requests(
    condition: GradeCondition,
    endpoint: EndpointSettings,
    items: Mapping[str, WorkItem],
    texts: Mapping[tuple[str, int, str], str],
    cells: Mapping[str, list[Any]],
) -> tuple[list[ModelRequest], dict[str, list[Any]], dict[tuple[str, int], tuple[str, str]]]:
    """The judge's requests for the cells (`item_id, epoch, solution_hash`) whose solution text
    is in `texts` (others changed or vanished since planning: a later run grades them); the
    cells kept (`item_id, epoch`), and per kept cell the (solution hash, text) judged."""
    assert condition.rubric is not None and condition.params is not None
    assert condition.model_id is not None
    rubric = condition.rubric
    sim = endpoint.kind == "sim"
    schema = VERDICT if condition.structured else None
    kept: dict[str, list[Any]] = {"item_id": [], "epoch": []}
    judged: dict[tuple[str, int], tuple[str, str]] = {}
    requests = []
    for item_id, epoch, wanted in zip(
        cells["item_id"], cells["epoch"], cells["solution_hash"], strict=True
    ):
        text = texts.get((item_id, epoch, wanted))
        if text is None:
            continue
        item = items[item_id]
        requests.append(
            ModelRequest(
                model=condition.model_id,
                messages=rubric.render_rubric(item, text),
                params=condition.params,
                sim_hints=_judge_hints(item, epoch, text) if sim else None,
                reply_schema=schema,
            )
        )
        kept["item_id"].append(item_id)
        kept["epoch"].append(epoch)
        judged[(item_id, epoch)] = (wanted, text)
    return requests, kept, judged


def pairwise_requests(
    condition: GradeCondition,
    endpoint: EndpointSettings,
    items: Mapping[str, WorkItem],
    texts: Mapping[tuple[str, int, str], str],
    baseline: Mapping[tuple[str, int], tuple[str, str]],
    cells: Mapping[str, list[Any]],
) -> tuple[list[ModelRequest], dict[str, list[Any]], dict[tuple[str, int], tuple[str, str]]]:
    """A pairwise judge's requests: as `judge_requests`, with the baseline's current answer to
    the same item and epoch (`baseline`: `(item_id, epoch) -> (hash, text)`) as the other side,
    shown first or second as the condition says. Cells without either answer are left out."""
    assert condition.pairwise is not None and condition.rubric is not None
    assert condition.model_id is not None and condition.params is not None
    sim = endpoint.kind == "sim"
    schema = PAIRWISE_VERDICT if condition.structured else None
    kept: dict[str, list[Any]] = {"item_id": [], "epoch": []}
    judged: dict[tuple[str, int], tuple[str, str]] = {}
    requests = []
    for item_id, epoch, wanted in zip(
        cells["item_id"], cells["epoch"], cells["solution_hash"], strict=True
    ):
        text = texts.get((item_id, epoch, wanted))
        other = baseline.get((item_id, epoch))
        if text is None or other is None:
            continue
        first, second = (text, other[1]) if condition.pairwise.condition_first else (other[1], text)
        item = items[item_id]
        hints = _solver_hints(item, epoch) | {"role": "pairwise", "first": first, "second": second}
        requests.append(
            ModelRequest(
                model=condition.model_id,
                messages=render_pairwise(condition.rubric, item, first, second),
                params=condition.params,
                sim_hints=hints if sim else None,
                reply_schema=schema,
            )
        )
        kept["item_id"].append(item_id)
        kept["epoch"].append(epoch)
        judged[(item_id, epoch)] = (wanted, text)
    return requests, kept, judged


#: What a pairwise judge with structured output is asked for.
PAIRWISE_VERDICT = ReplySchema(
    "pairwise_verdict", PAIRWISE_SCHEMA, "Record the verdict: the reasoning, then the winner."
)

#: What a judge with structured output is asked for: the verdict object and nothing else.
VERDICT = ReplySchema(
    VERDICT_SCHEMA_NAME, VERDICT_SCHEMA, "Record the verdict: the reasoning, then the score."
)


def _solver_hints(item: WorkItem, epoch: int) -> dict[str, Any]:
    return {
        "item_id": item.id,
        "epoch": epoch,
        "target": item.target,
        "modality": item.modality,
        "difficulty": item.difficulty,
    }


def _judge_hints(item: WorkItem, epoch: int, solution: str) -> dict[str, Any]:
    return _solver_hints(item, epoch) | {"role": "judge", "solution": solution}

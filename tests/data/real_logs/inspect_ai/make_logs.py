"""Make the inspect_ai logs in this folder with the real tool (README.md has the commands).

Run with the interpreter of a venv that has inspect_ai (never the project's):

    python make_logs.py OUT FORMAT MODEL TASK...    # FORMAT eval | json; MODEL mockllm/NAME

Three tasks whose sample ids overlap (1..8); the mock model answers through a function, so the
logs hold right and wrong answers (`mockllm/model` misses other questions than any other
name); `addition` runs two epochs, `multiplication` has two scorers."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from typing import Any

from inspect_ai import Task, eval, task
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import choice, includes, match
from inspect_ai.solver import generate, multiple_choice

PAIRS = [(3, 4), (7, 5), (2, 9), (6, 6), (1, 8), (4, 4), (9, 3), (5, 2)]


def answerer(first: bool) -> Callable[..., ModelOutput]:
    """A mock model: right for most questions, wrong where the result is a multiple of 3 (of
    4 for another model) or, for products, of 5 (of 6)."""

    def answer(messages: list[Any], tools: Any, tool_choice: Any, config: Any) -> ModelOutput:
        last = messages[-1]
        text = str(last.content if isinstance(last.content, str) else last.text)
        found = re.search(r"What is (\d+) ([+*]) (\d+)\?", text)
        if found:
            a, op, b = int(found.group(1)), found.group(2), int(found.group(3))
            value = a + b if op == "+" else a * b
            step = (3 if op == "+" else 5) + (0 if first else 1)
            return _output(text, str(value + 1 if value % step == 0 else value))
        letters = re.findall(r"^([A-Z])\) ", text, flags=re.M)
        pick = letters[(len(text) + (0 if first else 1)) % len(letters)] if letters else "A"
        return _output(text, f"ANSWER: {pick}")

    return answer


def _output(prompt: str, content: str) -> ModelOutput:
    """Usage stated, so that mockllm does not count tokens (tiktoken would download a table)."""
    output = ModelOutput.from_content("mockllm/model", content)
    inputs, outputs = len(prompt.split()), len(content.split())
    output.usage = ModelUsage(
        input_tokens=inputs, output_tokens=outputs, total_tokens=inputs + outputs
    )
    return output


@task
def addition() -> Task:
    samples = [
        Sample(id=i, input=f"What is {a} + {b}?", target=str(a + b))
        for i, (a, b) in enumerate(PAIRS, start=1)
    ]
    return Task(dataset=samples, solver=generate(), scorer=match(numeric=True), epochs=2)


@task
def multiplication() -> Task:
    samples = [
        Sample(id=i, input=f"What is {a} * {b}?", target=str(a * b))
        for i, (a, b) in enumerate(PAIRS, start=1)
    ]
    return Task(dataset=samples, solver=generate(), scorer=[match(numeric=True), includes()])


@task
def colours() -> Task:
    questions = [
        ("What colour is the sky on a clear day?", ["green", "blue", "red", "black"], "B"),
        ("What colour is grass?", ["green", "white", "purple", "orange"], "A"),
        ("What colour is snow?", ["brown", "grey", "white", "blue"], "C"),
        ("What colour is a ripe banana?", ["red", "yellow", "blue", "black"], "B"),
        ("What colour is coal?", ["white", "pink", "yellow", "black"], "D"),
        ("What colour is a ripe tomato?", ["red", "green", "blue", "white"], "A"),
    ]
    samples = [
        Sample(id=i, input=q, choices=c, target=t) for i, (q, c, t) in enumerate(questions, start=1)
    ]
    return Task(dataset=samples, solver=multiple_choice(), scorer=choice())


TASKS = {"addition": addition, "multiplication": multiplication, "colours": colours}

if __name__ == "__main__":
    out, log_format, name, *tasks = sys.argv[1:]
    model = get_model(name, custom_outputs=answerer(name == "mockllm/model"))
    eval(
        [TASKS[t]() for t in tasks],
        model=model,
        log_dir=out,
        log_format=log_format,
        display="none",
        max_connections=1,
    )

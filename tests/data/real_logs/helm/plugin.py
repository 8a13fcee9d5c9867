"""Two small offline HELM scenarios for the import tests (`helm-run --plugins`): their
instances are numbered id0.. by HELM in both (overlapping ids), both have train, valid and test
splits, and `simple/model1` (which answers with the last word of its prompt) gets some right."""

from __future__ import annotations

from typing import ClassVar

from helm.benchmark.adaptation.adapter_spec import ADAPT_GENERATION, AdapterSpec
from helm.benchmark.adaptation.common_adapter_specs import get_multiple_choice_joint_adapter_spec
from helm.benchmark.metrics.common_metric_specs import get_exact_match_metric_specs
from helm.benchmark.run_spec import RunSpec, run_spec_function
from helm.benchmark.scenarios.scenario import (
    CORRECT_TAG,
    TEST_SPLIT,
    TRAIN_SPLIT,
    VALID_SPLIT,
    Input,
    Instance,
    Output,
    Reference,
    Scenario,
    ScenarioSpec,
)

WORDS = ["apple", "river", "stone", "cloud", "tiger", "maple", "ocean", "lemon", "piano", "grass"]


def _split(i: int) -> str:
    return TRAIN_SPLIT if i < 4 else VALID_SPLIT if i < 7 else TEST_SPLIT


class LastWordScenario(Scenario):
    """Say the last word of a list: right when the list ends with the word asked for."""

    name = "last_word"
    description = "The last word of a short list."
    tags: ClassVar[list[str]] = ["generation"]

    def get_instances(self, output_path: str) -> list[Instance]:
        instances = []
        for i in range(14):
            words = [WORDS[(i + k) % len(WORDS)] for k in range(3)]
            answer = words[-1] if i % 3 else words[0]
            instances.append(
                Instance(
                    Input(text=" ".join(words)),
                    references=[Reference(Output(text=answer), tags=[CORRECT_TAG])],
                    split=_split(i),
                )
            )
        return instances


class OddOneOutScenario(Scenario):
    """Which word is not a fruit: four choices."""

    name = "odd_one_out"
    description = "The odd one out of four words."
    tags: ClassVar[list[str]] = ["multiple_choice"]

    def get_instances(self, output_path: str) -> list[Instance]:
        instances = []
        for i in range(14):
            fruits = ["apple", "lemon", "pear", "plum", "fig"]
            odd = WORDS[(i * 3 + 1) % len(WORDS)]
            options = [fruits[(i + k) % len(fruits)] for k in range(3)]
            options.insert(i % 4, odd if odd not in fruits else "stone")
            references = [
                Reference(Output(text=o), tags=[CORRECT_TAG] if k == i % 4 else [])
                for k, o in enumerate(options)
            ]
            instances.append(
                Instance(Input(text="Which is not a fruit?"), references, split=_split(i))
            )
        return instances


@run_spec_function("last_word")
def get_last_word_spec() -> RunSpec:
    adapter_spec = AdapterSpec(
        method=ADAPT_GENERATION,
        instructions="",
        input_prefix="",
        input_suffix="\n",
        output_prefix="",
        output_suffix="\n",
        max_train_instances=1,
        num_outputs=1,
        max_tokens=5,
        num_train_trials=2,
        temperature=0.0,
        stop_sequences=["\n"],
    )
    return RunSpec(
        name="last_word",
        scenario_spec=ScenarioSpec(class_name="plugin.LastWordScenario"),
        adapter_spec=adapter_spec,
        metric_specs=get_exact_match_metric_specs(),
        groups=["last_word"],
    )


@run_spec_function("odd_one_out")
def get_odd_one_out_spec() -> RunSpec:
    adapter_spec = get_multiple_choice_joint_adapter_spec(
        instructions="Answer with a single letter.",
        input_noun="Question",
        output_noun="Answer",
        max_train_instances=2,
        num_train_trials=2,
    )
    return RunSpec(
        name="odd_one_out",
        scenario_spec=ScenarioSpec(class_name="plugin.OddOneOutScenario"),
        adapter_spec=adapter_spec,
        metric_specs=get_exact_match_metric_specs(),
        groups=["odd_one_out"],
    )

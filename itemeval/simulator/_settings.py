"""The simulated provider's settings: its model catalog, randomness, judge behaviour, latency,
faults, prompt cache and batch API (`SimSettings`, an endpoint's `sim:`).

Like the rest of an endpoint's settings they are execution knobs: none enters a condition id.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

PositiveFloat = Annotated[float, Field(gt=0)]
Probability = Annotated[float, Field(ge=0.0, le=1.0)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SimModelSpec(_Strict):
    """One simulated model: how often it is right, and as a judge how often its verdict is right."""

    ability: Probability = Field(
        description="roughly the expected accuracy over items of uniformly spread difficulty "
        "(see itemeval.simulator.p_correct)"
    )
    judge_accuracy: Probability = Field(
        0.95, description="probability that a judge verdict from this model is right"
    )
    judge_false_pass: Probability | None = Field(
        None,
        description="as a judge, the chance it passes a wrong answer (default 1 - judge_accuracy)",
    )
    judge_false_fail: Probability | None = Field(
        None,
        description="as a judge, the chance it fails a right answer (default 1 - judge_accuracy)",
    )
    judge_shared_errors: Probability = Field(
        0.0,
        description="as a judge, the share of its verdicts drawn from a draw every judge with "
        "this setting shares (per answer): judges err on the same answers, their errors "
        "correlate (about the product of their shares)",
    )
    judge_length_bias: Annotated[float, Field(ge=-1, le=1)] = Field(
        0.0,
        description="as a judge, how much more often it passes a long answer: added to its "
        "chance of a pass (false pass up, false fail down) per 1,000 characters of the judged "
        "answer, up to 1,000; as a pairwise judge, 4 x this is added to the log-odds that the "
        "first-shown answer wins per 1,000 characters it is longer (up to 1,000)",
    )
    judge_position_bias: Annotated[float, Field(ge=0, le=0.5)] = Field(
        0.0,
        description="as a pairwise judge, how much more often the answer shown first wins: of "
        "the verdicts that pick a side over pairs asked in both orders, a share 0.5 + this goes "
        "to the first-shown answer (a verdict for the second is turned to the first with "
        "probability 2 x this)",
    )
    verbosity: Annotated[float, Field(gt=0, le=100)] = Field(
        1.0,
        description="how much reasoning and prose it writes, as a multiple of the default "
        "(answers themselves do not change); verbose models cost more than estimated",
    )
    reasoning_tokens: Annotated[int, Field(ge=0, le=1_000_000)] = Field(
        0,
        description="a reasoning model: mean hidden reasoning tokens per answer even without "
        "reasoning parameters (at reasoning_effort medium; low is a quarter, high four times, "
        "minimal none); 0 = reasons only when asked (reasoning_effort, thinking budget)",
    )
    min_cacheable_tokens: Annotated[int, Field(ge=1)] = Field(
        1024,
        description="the shortest prompt prefix the sim-server's prompt cache keeps for this "
        "model (Anthropic's minimum cacheable length; the start of OpenAI's 128-token steps)",
    )


class LatencySettings(_Strict):
    """Time the simulator takes to answer one request."""

    distribution: Literal["fixed", "uniform", "lognormal"] = "fixed"
    median_ms: Annotated[float, Field(ge=0)] = 0.0
    spread: Annotated[float, Field(ge=0)] = Field(
        0.0,
        description="uniform: +- this fraction of median_ms; lognormal: sigma of log(latency)",
    )
    per_output_token_ms: Annotated[float, Field(ge=0)] = 0.0


class FaultSettings(_Strict):
    """Injected faults, each a probability per attempt (drawn from a seeded generator)."""

    rate_limit: Probability = 0.0  # 429 with Retry-After
    server_error: Probability = 0.0  # 500
    timeout: Probability = 0.0  # no answer for `hang_s` (the client's timeout fires first)
    malformed: Probability = 0.0  # 200 whose body is not the documented shape
    empty: Probability = 0.0  # 200 with empty content
    never_answer: Probability = Field(
        0.0,
        description="share of requests (chosen by content and epoch, so every attempt of one) "
        "that hang for hang_s: calls the provider never answers",
    )
    retry_after_s: Annotated[float, Field(ge=0)] = 0.5
    hang_s: PositiveFloat = 600.0

    @model_validator(mode="after")
    def _total_at_most_one(self) -> FaultSettings:
        total = self.rate_limit + self.server_error + self.timeout + self.malformed + self.empty
        if total > 1.0:
            raise ValueError(f"fault rates add up to {total:.3f}; their sum must be at most 1")
        return self


class PromptCacheSettings(_Strict):
    """The sim-server's prompt cache, reported as each provider reports its own (see
    docs/providers.md): Anthropic's explicit `cache_control` breakpoints, OpenAI's and Gemini's
    automatic prefix caching. The in-process simulator does not simulate caching."""

    enabled: bool = True
    ttl_s: PositiveFloat = Field(
        300.0, description="lifetime of an entry since its last use (Anthropic's default 5m)"
    )
    long_ttl_s: PositiveFloat = Field(
        3600.0, description='lifetime of an Anthropic `cache_control: {ttl: "1h"}` entry'
    )
    max_entries: Annotated[int, Field(ge=1)] = Field(
        250_000, description="prefix entries kept at most (least recently used go first)"
    )


class BatchSettings(_Strict):
    """How the sim-server runs OpenAI Batches and Anthropic Message Batches."""

    delay_s: Annotated[float, Field(ge=0)] = Field(
        1.0,
        description="time from creation until the last request of a batch is done; the requests "
        "finish evenly spread over it, in order",
    )
    window_s: PositiveFloat | None = Field(
        None,
        description="the completion window in seconds (default: the requested one, 24 h); a "
        "batch still unfinished at its end expires, its remaining requests expired",
    )
    error_rate: Probability = Field(
        0.0, description="share of batch requests that end in an error (a 500 / api_error)"
    )
    force_expire: bool = Field(
        False,
        description="every batch does nothing and expires when its delay_s has passed (all "
        "its requests expired)",
    )


class SimSettings(_Strict):
    """The simulated provider: its model catalog, randomness, judge behaviour, latency, faults.

    `models` is merged over the default catalog (`sim/strong`, `sim/medium`, `sim/weak`,
    `sim/judge`, `sim/reasoner`); names are given without the `sim/` prefix. `prompt_cache` and
    `batch` apply to `itemeval sim-server` only.
    """

    seed: int = 0
    models: dict[str, SimModelSpec] = Field(default_factory=dict)
    judge_malformed_rate: Probability = Field(
        0.0,
        description="share of judge answers that break the score contract, spread evenly over "
        "no_json_object, no_score_in_json, score_not_numeric and score_not_finite",
    )
    latency: LatencySettings = Field(default_factory=LatencySettings)
    faults: FaultSettings = Field(default_factory=FaultSettings)
    prompt_cache: PromptCacheSettings = Field(default_factory=PromptCacheSettings)
    batch: BatchSettings = Field(default_factory=BatchSettings)
    wire_format: Literal["openai", "anthropic"] = Field(
        "openai", description="the wire format used to reach `itemeval sim-server` (base_url set)"
    )

    @field_validator("models")
    @classmethod
    def _model_names(cls, value: dict[str, SimModelSpec]) -> dict[str, SimModelSpec]:
        for name in value:
            if not name or name.startswith("sim/") or "/" in name:
                raise ValueError(f"model name {name!r}: give it without the 'sim/' prefix")
        return value

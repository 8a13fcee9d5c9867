"""Prices: USD per million input, output and cached-input tokens, and the cost of one call.

    pricing = Pricing.load()                      # the packaged table (pricing.yaml)
    pricing = Pricing.load("my_prices.yaml")      # the same, with a user's file merged over it
    price = pricing.price("gpt-4o-2024-08-06")    # -> ModelPrice, or None for an unknown model
    usd = price.cost(usage) if price else 0.0     # unknown: the caller warns and counts $0

Lookup order: the exact id, the longest key that is a prefix of the id and whose entry says its
family shares its price (`family: dated`: the key plus a snapshot suffix, `-2024-08-06`,
`-20241022`, `@20241022`, `-001`, `-latest`, optionally `-v2:0`; `family: any`: any id the key
begins, up to a `-`, `:` or `@`), glob patterns (`sim/*`), then all of that again without a leading
`vendor/` (OpenRouter-style ids). An id that begins with a key whose entry names no family is not
priced by it: `o3-deep-research` is not `o3`, and under a budget cap an unpriced model is refused.
Reasoning tokens are output tokens and are billed as such. Input tokens read from the provider's
prompt cache are billed at `cached_input`, input tokens written to it at `cache_write` (Anthropic
charges 1.25x the input price for 5-minute entries); either defaults to the input price when a
model has none.

Tiers: `batch` is the share of every price a provider charges through its batch API (0.5: half
price, as OpenAI, Anthropic and Gemini charge). `price(model, tier="batch")` gives the prices of
that tier; a model without a `batch` entry keeps its live prices there (never an underestimate).

Long context: `long_context: {above: 200000, input: 2, output: 1.5}` says that a call whose input
exceeds `above` tokens is billed, all of it, at `input` times the input prices (cache reads and
writes too) and `output` times the output price, as Anthropic and Gemini bill long prompts. A
call's cost uses the tier its reported input reaches; its worst case (what the cap reserves), the
tier its input bound reaches.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from itemeval._util.yaml_lines import safe_load
from itemeval.errors import ConfigError, Problem
from itemeval.providers.types import Usage

_PACKAGED = "pricing.yaml"

NonNegative = Annotated[float, Field(ge=0)]

#: What follows a key in a snapshot of the same model (`family: dated`).
_SNAPSHOT = re.compile(r"(?:[-@](?:\d{4}-\d{2}-\d{2}|\d{8}|\d{3}|latest))+(?:-v\d+(?::\d+)?)?")


class _LongContext(BaseModel):
    model_config = ConfigDict(extra="forbid")

    above: Annotated[int, Field(gt=0)]
    input: Annotated[float, Field(ge=1)]
    output: Annotated[float, Field(ge=1)] = 1.0


class _PriceEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input: NonNegative
    output: NonNegative
    cached_input: NonNegative | None = None
    cache_write: NonNegative | None = None
    max_output: Annotated[int, Field(gt=0)] | None = None
    batch: Annotated[float, Field(gt=0, le=1)] | None = None
    family: Literal["dated", "any"] | None = None
    long_context: _LongContext | None = None


#: The price tiers: `live` (one call at a time) and `batch` (a provider's batch API).
TIERS = ("live", "batch")


class _PriceFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prices_as_of: str | None = None
    currency: str = "USD"
    models: dict[str, _PriceEntry] = Field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """USD per million tokens for one model (`key` is the table entry that matched)."""

    key: str
    input_per_m: float
    output_per_m: float
    cached_input_per_m: float
    max_output_tokens: int | None = None  # the model's own output limit, when known
    cache_write_per_m: float | None = None  # None: cache writes cost the input price
    batch_share: float | None = None  # the batch API's share of each price (None: unknown)
    tier: str = "live"  # which tier these prices are
    #: Input tokens past which a call is billed at the long-context multipliers (None: never).
    long_above: int | None = None
    long_input: float = 1.0
    long_output: float = 1.0

    def at_tier(self, tier: str) -> ModelPrice:
        """These prices at `tier` (`live` or `batch`); a model without a known batch share
        keeps its live prices in the batch tier."""
        if tier == self.tier:
            return self
        if tier not in TIERS:
            raise ValueError(f"unknown price tier {tier!r}; tiers are {', '.join(TIERS)}")
        if self.tier != "live":
            raise ValueError("tier prices are derived from the live prices")
        share = self.batch_share if self.batch_share is not None else 1.0
        return replace(
            self,
            input_per_m=self.input_per_m * share,
            output_per_m=self.output_per_m * share,
            cached_input_per_m=self.cached_input_per_m * share,
            cache_write_per_m=None
            if self.cache_write_per_m is None
            else self.cache_write_per_m * share,
            tier=tier,
        )

    @property
    def cache_write_price(self) -> float:
        return self.input_per_m if self.cache_write_per_m is None else self.cache_write_per_m

    def shares(self, input_tokens: int) -> tuple[float, float]:
        """The multipliers of the input and output prices for a call with `input_tokens` of
        input: the long-context tier's past `long_above`, else 1."""
        if self.long_above is not None and input_tokens > self.long_above:
            return self.long_input, self.long_output
        return 1.0, 1.0

    def cost(self, usage: Usage, calls: int = 1) -> float:
        """USD of one call: cache reads at `cached_input`, cache writes at `cache_write`, the
        rest of the input at `input`, output (reasoning included) at `output`; all at the
        long-context tier when the input reaches it. `calls`: `usage` is the sum of that many
        calls (an estimate), whose tier is that of their mean input."""
        cached = min(usage.cached_input_tokens, usage.input_tokens)
        written = min(usage.cache_write_input_tokens, usage.input_tokens - cached)
        long_in, long_out = self.shares(usage.input_tokens // max(1, calls))
        return (
            (
                (usage.input_tokens - cached - written) * self.input_per_m
                + cached * self.cached_input_per_m
                + written * self.cache_write_price
            )
            * long_in
            + usage.output_tokens * self.output_per_m * long_out
        ) / 1_000_000

    def worst_case(self, input_tokens: int, output_tokens: int) -> float:
        """USD of a call that uses at most `input_tokens` and `output_tokens`: an upper bound
        whatever the provider's cache does (every input token at the dearer of the input and
        the cache-write price), at the tier `input_tokens` reaches."""
        input_price = max(self.input_per_m, self.cache_write_price, self.cached_input_per_m)
        long_in, long_out = self.shares(input_tokens)
        return (
            input_tokens * input_price * long_in + output_tokens * self.output_per_m * long_out
        ) / 1_000_000

    def read_savings(self, cached_input_tokens: int) -> float:
        """USD that `cached_input_tokens` read from the prompt cache saved against the input
        price (what prompt caching saved, before any cache-write premium)."""
        return cached_input_tokens * (self.input_per_m - self.cached_input_per_m) / 1_000_000


class Pricing:
    """A price table; build it with `Pricing.load`."""

    def __init__(
        self,
        entries: dict[str, ModelPrice],
        *,
        prices_as_of: str | None = None,
        families: dict[str, str | None] | None = None,
    ):
        """`families`: each key's `family` (`dated`, `any` or None: exact ids only)."""
        self.prices_as_of = prices_as_of
        self._exact = {k: v for k, v in entries.items() if not _is_pattern(k)}
        self._patterns = [(k, v) for k, v in entries.items() if _is_pattern(k)]
        self._families = families or {}
        # Longest first, so `gpt-4o-mini` wins over `gpt-4o` for `gpt-4o-mini-2024-07-18`.
        self._prefixes = sorted(
            (k for k in self._exact if self._families.get(k)), key=len, reverse=True
        )

    @classmethod
    def load(cls, override_path: str | Path | None = None) -> Pricing:
        """The packaged table, with the entries of `override_path` (same format) replacing or
        adding to it. A bad override file is a `ConfigError` naming the file and the field."""
        text = resources.files("itemeval.providers.money").joinpath(_PACKAGED).read_text("utf-8")
        packaged = _parse(text, f"itemeval/providers/money/{_PACKAGED}")
        entries = dict(packaged.models)
        as_of = packaged.prices_as_of
        if override_path is not None:
            path = Path(override_path)
            try:
                override_text = path.read_text(encoding="utf-8")
            except OSError as exc:
                raise ConfigError(
                    Problem(f"cannot read the pricing file: {exc}", file=str(path))
                ) from exc
            override = _parse(override_text, str(path))
            for key, entry in override.models.items():
                base = entries.get(key)
                if base is not None:  # a new price for a known model: its family and tiers stay
                    kept = {
                        name: getattr(base, name)
                        for name in ("family", "long_context")
                        if name not in entry.model_fields_set
                    }
                    entry = entry.model_copy(update=kept)
                entries[key] = entry
            as_of = override.prices_as_of or as_of
        prices = {
            key: ModelPrice(
                key=key,
                input_per_m=e.input,
                output_per_m=e.output,
                cached_input_per_m=e.input if e.cached_input is None else e.cached_input,
                max_output_tokens=e.max_output,
                cache_write_per_m=e.cache_write,
                batch_share=e.batch,
                long_above=e.long_context.above if e.long_context else None,
                long_input=e.long_context.input if e.long_context else 1.0,
                long_output=e.long_context.output if e.long_context else 1.0,
            )
            for key, e in entries.items()
        }
        families: dict[str, str | None] = {key: e.family for key, e in entries.items()}
        return cls(prices, prices_as_of=as_of, families=families)

    def price(self, model: str, tier: str = "live") -> ModelPrice | None:
        """The price of `model` at `tier`, or None when the table does not know it."""
        found = self._lookup(model)
        if found is None and "/" in model and not model.startswith("sim/"):
            found = self._lookup(model.rsplit("/", 1)[1])
        return found if found is None or tier == "live" else found.at_tier(tier)

    def cost(self, model: str, usage: Usage) -> float:
        """USD of one call; raises `KeyError` for an unknown model (check `price()` first)."""
        price = self.price(model)
        if price is None:
            raise KeyError(f"no price for model {model!r}")
        return price.cost(usage)

    def models(self) -> list[str]:
        return sorted([*self._exact, *(k for k, _ in self._patterns)])

    def _lookup(self, model: str) -> ModelPrice | None:
        if model in self._exact:
            return self._exact[model]
        for key in self._prefixes:
            if not model.startswith(key) or model[len(key)] not in "-:@":
                continue
            if self._families[key] == "any" or _SNAPSHOT.fullmatch(model, len(key)):
                return self._exact[key]
        for pattern, price in self._patterns:
            if fnmatch.fnmatchcase(model, pattern):
                return price
        return None


def _is_pattern(key: str) -> bool:
    return any(c in key for c in "*?[")


def _parse(text: str, source: str) -> _PriceFile:
    try:
        data: Any = safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise ConfigError(Problem(f"not valid YAML: {exc}", file=source, line=line)) from exc
    try:
        return _PriceFile.model_validate(data or {})
    except ValidationError as exc:
        problems = [
            Problem(
                err["msg"],
                file=source,
                field=".".join(str(p) for p in err["loc"]),
                hint="each model needs input and output (USD per million tokens), "
                "optionally cached_input, cache_write, max_output (the model's output limit "
                "in tokens), batch (the batch API's share of the prices, e.g. 0.5), family "
                "(dated or any: which ids beginning with the key share its price) and long_context "
                "({above: tokens, input: multiplier, output: multiplier})",
            )
            for err in exc.errors()
        ]
        raise ConfigError(problems) from None

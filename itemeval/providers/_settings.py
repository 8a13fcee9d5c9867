"""How to reach one model endpoint: `EndpointSettings`, exactly a study's `endpoints:` entry.

Everything here is an execution knob (where, how fast, how patient): none of it may change what a
model answers, so none of it enters a condition id. Keys are never stored: `api_key_env` and
`headers_env` name environment variables that are read at the moment a client is built.

An endpoint of kind `sim` without a `base_url` embeds the simulated provider's settings
(`SimSettings`, the simulator's: `itemeval/simulator/_settings.py`).

`kind` is a built-in wire format (`openai`, `anthropic`, `gemini`, `sim`) or a provider plugin:
an entry-point name of the group `itemeval.providers`, or `package.module:attribute`
(`itemeval.plugins`). Only the syntax is checked here; the study's cross-checks load the plugin.
"""

from __future__ import annotations

import ipaddress
import re
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from itemeval.plugins import syntax_problem
from itemeval.providers._hedge_settings import HedgeSettings
from itemeval.secrets import credential_problem, looks_like_credential
from itemeval.simulator import SimSettings

#: The wire formats itemeval speaks itself; any other `kind` names a provider plugin.
BUILTIN_KINDS = frozenset({"openai", "anthropic", "gemini", "sim"})

#: Where each kind of endpoint lives when `base_url` is not given (each SDK's own convention:
#: OpenAI's includes `/v1`, Anthropic's does not, Gemini's includes the API version).
DEFAULT_BASE_URLS: dict[str, str] = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
    "gemini": "https://generativelanguage.googleapis.com/v1beta",
}

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
_HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+\Z")

PositiveFloat = Annotated[float, Field(gt=0)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --------------------------------------------------------------------------- the batch tier

#: The wire formats whose provider has a batch API that itemeval drives.
BATCH_WIRES = frozenset({"openai", "anthropic"})
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d)\s*$")
_UNIT_S = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str) -> float | None:
    """Seconds of `90s`, `30m`, `12h`, `1.5d`; None when `text` is not such a duration."""
    match = _DURATION.match(text)
    return float(match.group(1)) * _UNIT_S[match.group(2)] if match else None


class BatchTierSettings(_Strict):
    """The provider's batch API as a cost tier (an endpoint's `batch:`): calls wait for a
    batch, at the provider's batch price (about half), instead of being sent one by one.

    Like every endpoint setting it never enters a condition id: a cell answered through a batch
    is the same cell (its rows say `tier: batch`)."""

    enabled: bool = Field(
        False, description="send the pending calls of this endpoint's conditions as batches"
    )
    completion_window: Literal["24h"] = Field(
        "24h", description="the provider's completion window (OpenAI and Anthropic offer 24h)"
    )
    deadline: str | None = Field(
        None,
        description="when to stop waiting: a duration after the run's first submission (`6h`, "
        "`90m`, `2d`) or a time with its zone (`2026-07-01T09:00:00+00:00`). The cells still "
        "waiting then are cancelled at the provider and called live. Default: the completion "
        "window",
    )
    poll_interval_s: PositiveFloat = Field(
        60.0, description="how often a batch's status is asked for while it runs"
    )
    max_requests: Annotated[int, Field(ge=1, le=100_000)] | None = Field(
        None,
        description="requests per batch at most (default the provider's limit: OpenAI 50,000, "
        "Anthropic 100,000); larger sets are split",
    )
    max_attempts: Annotated[int, Field(ge=1, le=10)] = Field(
        2,
        description="batches a cell may go through when its request errors transiently or "
        "expires, before it is called live",
    )

    @field_validator("deadline")
    @classmethod
    def _valid_deadline(cls, value: str | None) -> str | None:
        if value is None or parse_duration(value) is not None:
            return value
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            moment = None
        if moment is None or moment.tzinfo is None:
            raise ValueError(
                f"{value!r} is neither a duration (`6h`, `90m`, `2d`, `3600s`) nor a time with "
                "its zone (`2026-07-01T09:00:00+00:00`)"
            )
        return value

    def deadline_after(self, start: datetime) -> datetime:
        """The moment to stop waiting, for batches first submitted at `start` (UTC)."""
        if self.deadline is None:
            return start + timedelta(hours=24)
        seconds = parse_duration(self.deadline)
        if seconds is not None:
            return start + timedelta(seconds=seconds)
        return datetime.fromisoformat(self.deadline).astimezone(UTC)


# --------------------------------------------------------------------------- endpoints


class EndpointSettings(_Strict):
    """One model endpoint (a study's `endpoints:` entry)."""

    kind: str = Field(
        description="openai, anthropic, gemini or sim; or a provider plugin (an entry-point "
        "name of itemeval.providers, or package.module:attribute)"
    )
    base_url: str | None = Field(
        None,
        description="default per kind; for `sim`, no base_url means the in-process simulator "
        "and a base_url means `itemeval sim-server` over HTTP",
    )
    api_key_env: str | None = Field(
        None, description="name of the environment variable that holds the API key"
    )
    headers: dict[str, str] = Field(default_factory=dict)
    headers_env: dict[str, str] = Field(
        default_factory=dict, description="header name -> environment variable with its value"
    )
    requests_per_minute: Annotated[int, Field(gt=0)] | None = None
    tokens_per_minute: Annotated[int, Field(gt=0)] | None = None
    max_concurrency: Annotated[int, Field(gt=0, le=100_000)] = 64
    timeout_s: PositiveFloat = Field(120.0, description="per attempt")
    deadline_s: PositiveFloat | None = Field(
        None,
        description="per attempt, once it holds its permit, for every kind of endpoint: an "
        "attempt still unanswered then is cancelled and fails as `deadline` (retried within "
        "max_attempts); at most timeout_s. Default: none (timeout_s alone)",
    )
    hedge: HedgeSettings = Field(
        default_factory=HedgeSettings,
        description="second requests for straggling calls in a shard's tail (off by default)",
    )
    connect_timeout_s: PositiveFloat = 10.0
    max_attempts: Annotated[int, Field(ge=1, le=100)] = 6
    backoff_initial_s: Annotated[float, Field(ge=0)] = 1.0
    backoff_max_s: Annotated[float, Field(ge=0)] = 60.0
    max_retry_after_s: Annotated[float, Field(ge=0)] = Field(
        300.0, description="a Retry-After longer than this ends the call as rate_limited"
    )
    max_rate_limited_attempts: Annotated[int, Field(ge=1, le=10_000)] = Field(
        100,
        description="429s a call takes before it ends as rate_limited (a later run retries the "
        "cell); they do not use up max_attempts, and the endpoint's limiter paces what follows "
        "each. 1: a 429 ends the call",
    )
    anthropic_version: str = "2023-06-01"
    max_tokens_param: Literal["max_tokens", "max_completion_tokens"] | None = Field(
        None,
        description="OpenAI wire only: the body field for max_tokens; default "
        "max_completion_tokens on api.openai.com, max_tokens elsewhere (vLLM, Ollama, ...)",
    )
    self_hosted: bool = Field(
        False,
        description="a server you run yourself (vLLM, Ollama, TGI...): its models cost $0 "
        "unless a pricing file prices them, and the estimate does not warn about them "
        "(loopback URLs count as self-hosted)",
    )
    sim: SimSettings | None = None
    batch: BatchTierSettings | None = Field(
        None,
        description="the provider's batch API as a cheaper, slower tier (OpenAI and Anthropic "
        "wires); see docs/study.md",
    )
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="settings a provider plugin reads (plugin kinds only); like every endpoint "
        "setting they must not change what a model answers",
    )

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, value: str) -> str:
        if value in BUILTIN_KINDS:
            return value
        problem = syntax_problem(value)
        if problem is not None:
            raise ValueError(
                f"{problem}; built-in kinds: {', '.join(sorted(BUILTIN_KINDS))}, or a provider "
                "plugin (an entry-point name, or package.module:attribute)"
            )
        return value

    @field_validator("base_url")
    @classmethod
    def _valid_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                f"{value!r} is not an http(s) URL; write e.g. http://127.0.0.1:8000/v1"
            )
        if parts.username or parts.password:
            raise ValueError("credentials in base_url are not allowed; use api_key_env")
        return value.rstrip("/")

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is not None and not _ENV_NAME.match(value):
            raise ValueError(
                "must be the NAME of an environment variable (letters, digits, underscore), "
                "e.g. OPENAI_API_KEY; never the key itself"
            )
        return value

    @field_validator("headers")
    @classmethod
    def _plain_headers(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if not _HEADER_NAME.match(name):
                raise ValueError(f"{name!r} is not a valid HTTP header name")
            # A credential must come from the environment (`headers_env`), never from the
            # study file, which travels with jobs and is copied into manifests.
            why = credential_problem(name, value[name])
            if why is not None:
                raise ValueError(
                    f"header {why}: move it to headers_env ({name}: SOME_ENV_VAR) so it is "
                    "read from the environment"
                )
        return value

    @field_validator("headers_env")
    @classmethod
    def _env_headers(cls, value: dict[str, str]) -> dict[str, str]:
        for name, env in value.items():
            if not _HEADER_NAME.match(name):
                raise ValueError(f"{name!r} is not a valid HTTP header name")
            if not _ENV_NAME.match(env):
                raise ValueError(
                    f"header {name!r}: {env!r} must be the NAME of an environment variable"
                )
        return value

    @model_validator(mode="after")
    def _consistent(self) -> EndpointSettings:
        if self.kind != "sim" and self.sim is not None:
            raise ValueError("`sim` settings are only allowed on endpoints of kind 'sim'")
        if self.options and not self.is_plugin:
            raise ValueError(
                f"`options` are for provider plugins; a {self.kind} endpoint takes none"
            )
        for name, value in self.options.items():
            if looks_like_credential(value):
                raise ValueError(
                    f"options.{name}: the value looks like a credential; a plugin gets its key "
                    "from api_key_env and secret headers from headers_env (environment "
                    "variables), never from the study file"
                )
        keyless = self.api_key_env is None and not self.free_unless_priced
        if self.kind in DEFAULT_BASE_URLS and keyless:
            raise ValueError(
                f"api_key_env is required for the {self.kind} endpoint at {self.url} "
                "(name the environment variable that holds the key, e.g. "
                f"{self.kind.upper()}_API_KEY); only loopback servers and your own "
                "(self_hosted: true) may go without"
            )
        if self.deadline_s is not None and self.deadline_s > self.timeout_s:
            raise ValueError(
                f"deadline_s ({self.deadline_s:g}) is longer than timeout_s "
                f"({self.timeout_s:g}): the timeout would always end an attempt first; lower "
                "deadline_s or raise timeout_s"
            )
        if self.backoff_max_s < self.backoff_initial_s:
            raise ValueError("backoff_max_s must be at least backoff_initial_s")
        if self.batch_enabled and self.wire not in BATCH_WIRES:
            where = "the in-process simulator" if self.in_process else f"a {self.kind} endpoint"
            raise ValueError(
                f"batch.enabled: {where} has no batch API itemeval can drive; the batch tier "
                "needs an OpenAI or Anthropic endpoint (or `itemeval sim-server`: kind sim with "
                "a base_url)"
            )
        return self

    # ---------------------------------------------------------------- derived values

    @property
    def url(self) -> str:
        """The effective base URL ('' for the in-process simulator)."""
        if self.base_url is not None:
            return self.base_url
        return DEFAULT_BASE_URLS.get(self.kind, "")

    @property
    def wire(self) -> str:
        """The wire format the endpoint's client speaks (`sim` for the in-process simulator,
        the plugin's name for a plugin)."""
        if self.kind != "sim":
            return self.kind
        return "sim" if self.in_process else self.sim_settings.wire_format

    @property
    def batch_enabled(self) -> bool:
        """True when this endpoint's calls go through the provider's batch API."""
        return self.batch is not None and self.batch.enabled

    @property
    def is_plugin(self) -> bool:
        """True when a provider plugin serves this endpoint (`kind` is not built in)."""
        return self.kind not in BUILTIN_KINDS

    def structured_output(self, *, thinking: bool = False) -> bool:
        """Whether this endpoint's client can ask for a structured reply (a JSON schema): every
        built-in wire can, except Anthropic with extended thinking (a forced tool cannot be
        combined with thinking); a plugin's cannot (it never sees the schema)."""
        if self.is_plugin:
            return False
        return not (thinking and self.wire == "anthropic")

    @property
    def in_process(self) -> bool:
        """True for the in-process simulator (kind sim, no base_url)."""
        return self.kind == "sim" and self.base_url is None

    @property
    def is_loopback(self) -> bool:
        host = urlsplit(self.url).hostname or ""
        if host == "localhost":
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False

    @property
    def free_unless_priced(self) -> bool:
        """Its models cost $0 without a warning when the pricing table does not know them."""
        return self.self_hosted or self.is_loopback

    @property
    def sim_settings(self) -> SimSettings:
        return self.sim if self.sim is not None else SimSettings()

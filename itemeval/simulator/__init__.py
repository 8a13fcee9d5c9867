"""The simulator: simulated models `sim/<name>`: calibrated answers, judge outputs, latency, faults.

Over HTTP as `itemeval sim-server` (`start_server`: OpenAI, Anthropic and Gemini wire formats,
both batch APIs, `/_sim/stats`); in-process through the provider client
`itemeval.providers.SimProvider` (endpoint kind `sim` without `base_url`). The simulator stands
below the providers: it imports none of them, and an endpoint's `sim:` is its `SimSettings`.

The public names are `__all__`, imported on first use (the server's aiohttp only when it
starts); the modules are private: `_model` (the answer model: difficulty, p(correct)),
`_answers` and `_engine` (replies, judge outputs, latency, faults), `_server` and `_wire` (the
HTTP server and its wire formats), `_structured`, `_schema_values` and `_regex_strings`
(structured output: what a request asks for, a value of its schema), `_batches`,
`_openai_batches`, `_anthropic_batches` (the batch APIs), `_prompt_cache`, `_limits` (the
server's rate limits), `_stats` (`/_sim/stats`), `_settings` (its settings).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from itemeval._util.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    """
    _engine: ReplyTokens SimReply Simulator pairwise_preference
    _model: DEFAULT_CATALOG SLOPE item_difficulty p_correct stable_unit
    _answers: solution_matches
    _server: ServerLimits start_server
    _settings: BatchSettings FaultSettings LatencySettings PromptCacheSettings SimModelSpec
        SimSettings
    """,
)


if TYPE_CHECKING:  # the same names, for type checkers and editors
    from itemeval.simulator._answers import solution_matches as solution_matches
    from itemeval.simulator._engine import ReplyTokens as ReplyTokens
    from itemeval.simulator._engine import SimReply as SimReply
    from itemeval.simulator._engine import Simulator as Simulator
    from itemeval.simulator._engine import pairwise_preference as pairwise_preference
    from itemeval.simulator._model import DEFAULT_CATALOG as DEFAULT_CATALOG
    from itemeval.simulator._model import SLOPE as SLOPE
    from itemeval.simulator._model import item_difficulty as item_difficulty
    from itemeval.simulator._model import p_correct as p_correct
    from itemeval.simulator._model import stable_unit as stable_unit
    from itemeval.simulator._server import ServerLimits as ServerLimits
    from itemeval.simulator._server import start_server as start_server
    from itemeval.simulator._settings import BatchSettings as BatchSettings
    from itemeval.simulator._settings import FaultSettings as FaultSettings
    from itemeval.simulator._settings import LatencySettings as LatencySettings
    from itemeval.simulator._settings import PromptCacheSettings as PromptCacheSettings
    from itemeval.simulator._settings import SimModelSpec as SimModelSpec
    from itemeval.simulator._settings import SimSettings as SimSettings

"""Running a study: the driver, and where a run's shards run. Ray is imported here only.

    from itemeval.runtime import RunOptions, run_study
    outcome = run_study(loaded_study, RunOptions(yes=True))

The public names are `__all__`, imported on first use, so that importing the package (or one
name) does not import Ray. The modules are private:

- `_driver`: `run_study`: plan, gate, dispatch, account, and record how the run ended
- `_shards`, `_dispatch`: the unit of work and its dispatch to an executor
- `_executors`: the run's context and which executor serves it: `_inline_executor` (this
  process, `--no-ray`), `_local_executor` (this machine), `_ray_executor` (a cluster)
- `_worker`, `_shard_reads`, `_baseline`: `ShardRunner`, what a worker does with a shard
- `batch/`: the batch tier (providers' batch APIs), beside a stage's live dispatch
- `_actors`, `_cluster`, `_limiters`: Ray's actors, connecting to Ray, the limiter actors
- `_progress`, `_timeline`, `_event_loop`, `_failures`, `_pilot`, `_context`: process plumbing

What happens to each call of a shard (cache, budget, provider, journal) is `itemeval.calls`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from itemeval._util.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    """
    _driver: RunOptions RunOutcome run_study
    _context: RunContext
    _executors: with_shares
    _ray_executor: RayExecutor
    _shards: Shard ShardSummary generate_shards grade_shards
    _dispatch: Cap RowCost StageResult Stop fold
    _worker: ShardRunner fold_rows generate_target judge_target
    _progress: Progress
    _limiters: LimiterInfo list_limiters remove_limiters
    _cluster: process_ends_after_run
    """,
)


if TYPE_CHECKING:  # the same names, for type checkers and editors
    from itemeval.runtime._cluster import process_ends_after_run as process_ends_after_run
    from itemeval.runtime._context import RunContext as RunContext
    from itemeval.runtime._dispatch import Cap as Cap
    from itemeval.runtime._dispatch import RowCost as RowCost
    from itemeval.runtime._dispatch import StageResult as StageResult
    from itemeval.runtime._dispatch import Stop as Stop
    from itemeval.runtime._dispatch import fold as fold
    from itemeval.runtime._driver import RunOptions as RunOptions
    from itemeval.runtime._driver import RunOutcome as RunOutcome
    from itemeval.runtime._driver import run_study as run_study
    from itemeval.runtime._executors import with_shares as with_shares
    from itemeval.runtime._limiters import LimiterInfo as LimiterInfo
    from itemeval.runtime._limiters import list_limiters as list_limiters
    from itemeval.runtime._limiters import remove_limiters as remove_limiters
    from itemeval.runtime._progress import Progress as Progress
    from itemeval.runtime._ray_executor import RayExecutor as RayExecutor
    from itemeval.runtime._shards import Shard as Shard
    from itemeval.runtime._shards import ShardSummary as ShardSummary
    from itemeval.runtime._shards import generate_shards as generate_shards
    from itemeval.runtime._shards import grade_shards as grade_shards
    from itemeval.runtime._worker import ShardRunner as ShardRunner
    from itemeval.runtime._worker import fold_rows as fold_rows
    from itemeval.runtime._worker import generate_target as generate_target
    from itemeval.runtime._worker import judge_target as judge_target

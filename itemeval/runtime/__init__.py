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
- `_actors`, `_cluster`, `_limiters`: Ray's actors, connecting to Ray, the limiter actors
- `_progress`, `_timeline`, `_event_loop`, `_failures`, `_pilot`, `_context`: process plumbing

What happens to each call of a shard (cache, budget, provider, journal) is `itemeval.calls`.
"""

from __future__ import annotations

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

"""Running a study: the driver, and where a run's shards run. Ray is imported here only.

- `driver.py`: `run_study`: plan, gate, dispatch, account, and record how the run ended
- `shards.py`, `dispatch.py`: the unit of work and its dispatch to an executor
- `executors.py`: the run's context and which executor serves it: `inline_executor.py` (this
  process, `--no-ray`), `local_executor.py` (this machine), `ray_executor.py` (a cluster)
- `worker.py`, `shard_reads.py`, `baseline.py`: `ShardRunner`, what a worker does with a shard
- `actors.py`, `cluster.py`, `limiters.py`: Ray's actors, connecting to Ray, the limiter actors
- `progress.py`, `timeline.py`, `event_loop.py`, `failures.py`, `pilot.py`, `context.py`:
  process plumbing

What happens to each call of a shard (cache, budget, provider, journal) is `itemeval.calls`.
This file imports nothing, so that importing one module does not import Ray.
"""

"""A run that fails after it began writing is not bad input: `StoreFailedMidRun` (exit 5).

Exit 2 promises that nothing was written. Once a run has written its manifest, a storage
failure (an unreachable or full store, lost credentials, a corrupt fragment met mid-run) may
leave rows behind, so the driver turns it into `StoreFailedMidRun`, whose message, and the
manifest's `error`, say what the run had stored by then. The rows are kept and the same command
continues once the store works; any other exception stays what it was.
"""

from __future__ import annotations

from collections.abc import Mapping

from itemeval.errors import StoreError, StoreFailedMidRun
from itemeval.runtime._dispatch import StageResult
from itemeval.runtime._progress import Progress
from itemeval.secrets import redact
from itemeval.storage import access_problem


def storage_failure(exc: BaseException) -> str | None:
    """What went wrong, when `exc` is a failure of the store or of what it holds; else None."""
    if isinstance(exc, BrokenPipeError):
        return None  # stdout went away, not the store
    problem = access_problem(exc)
    if problem is not None:
        return problem
    if isinstance(exc, StoreError | OSError):  # other bad input (a limiter conflict) stays 2
        return f"{type(exc).__name__}: {exc}"
    return None


def written_so_far(stages: Mapping[str, StageResult], progress: Progress) -> str:
    """The rows this run had reported stored, per stage (`generate 120 rows, grade 0 rows`):
    finished stages from their results, the stage under way from its progress."""
    parts = [f"{s} {r.counts.done + r.counts.errors:,} rows" for s, r in stages.items()]
    current = getattr(progress, "_stage", "")
    if current and current not in stages:
        parts.append(f"{current} at least {progress.done:,} rows")
    return ", ".join(parts) or "no rows"


def failed_mid_run(
    exc: BaseException, stages: Mapping[str, StageResult], progress: Progress, manifest: str
) -> StoreFailedMidRun | None:
    """`StoreFailedMidRun` for a storage failure `exc` of a run whose manifest is `manifest`
    (a path inside the store), or None when `exc` is something else."""
    problem = storage_failure(exc)
    if problem is None:
        return None
    failure = StoreFailedMidRun(
        redact(
            f"the store failed after this run began writing; stored so far: "
            f"{written_so_far(stages, progress)} (kept; the run's manifest is {manifest}): "
            f"{problem} (then: once the store works, run the same command again; it "
            "continues where the store says it stopped)"
        )
    )
    failure.__cause__ = exc
    return failure

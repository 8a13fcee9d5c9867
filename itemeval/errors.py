"""Exceptions and exit codes.

Every failure a user can cause or meet has one exception class here, and every class carries the
exit code the CLI returns for it. Messages name the place (file, line, item, field) and say what
to do; they never contain secrets (see `itemeval.secrets`).

Below them are the signals that leave their module without being `ItemevalError`s (a caller
turns each into a row's error code, a retry, a failed shard or an interruption):
`TransientFailure`, `MalformedBody`, `PermitsUnavailable`, `BatchApiError` and `UncertainCreate`
(provider clients, the simulator and the batch tier), `LimiterUnreachable` (the machine's
limiter file: the rate limiter and the slots log it and keep asking), `TemplateFieldError`
(templates and adapters), `ScorerError` (a custom scorer's bug), `LedgerUnavailable` (the budget
ledger did not answer: the shard fails with its message), `DamagedLog` (the HELM and inspect_ai
log readers: a file that cannot be read, carrying its rejection; the reader counts and skips
it), `NotSent` (an attempt whose larger reservation did not fit under the budget cap: the retry
path ends the call with its result), `WorkerLost` and `Interrupted` (the dispatch loop, the
workers and the call path), `Stopped` and `Vanished` (a compaction's merge was asked to stop; a
fragment or summary changed under it: the store's compaction stops or tries again). Their old
homes re-export them.

Some stay near their code: no code outside their module raises or catches them, and no user
reads them.

* `itemeval.runtime._worker.RunGone`: a worker's shard outlived its driver; it ends that orphaned
  worker's task, and nobody is left to read it.
* `_Busy` (machine limiter), `_NotFound` (simulated batch API), `_Reject` (Every Eval Ever
  reader), `_NotUtf8` (CSV reader), `_Restart` (compaction: merge from every row): private to
  their module.

tests/core/test_exception_homes.py fails when an exception class is defined elsewhere without
being named here.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING

from itemeval._util.redaction import redact

# Nothing of itemeval's above the ground floor: these are for annotations only.
if TYPE_CHECKING:
    from itemeval.calls import CallOutcome
    from itemeval.importing._model import Rejection
    from itemeval.providers.types import ErrorCode, ModelResult


class ExitCode(IntEnum):
    """The process exit codes of every `itemeval` command (a contract: scripts depend on them)."""

    OK = 0
    CELL_ERRORS = 1  # the run finished but some cells ended in a provider error
    BAD_INPUT = 2  # config, dataset, template or store contents are invalid; nothing was written
    GATE_DECLINED = 3  # the cost estimate needed confirmation and did not get it
    BUDGET_CAP = 4  # the estimate or the spend reached `budget.max_usd`
    STORE_FAILED = 5  # the store failed after the run began writing; what it wrote is kept
    IMPORT_REFUSED = 6  # `itemeval import --strict` met a record it rejects; nothing was written
    INTERRUPTED = 130  # Ctrl-C (the shell convention 128 + SIGINT)


class ItemevalError(Exception):
    """Base class of every error itemeval raises on purpose."""

    exit_code: ExitCode = ExitCode.CELL_ERRORS


@dataclass(frozen=True, slots=True)
class Problem:
    """One finding about an input: where it is, what is wrong, and what to do.

    `severity` is "error" (the input is rejected) or "warning" (accepted as interpreted).
    """

    message: str
    file: str | None = None
    line: int | None = None
    item: str | None = None
    field: str | None = None
    hint: str | None = None
    severity: str = "error"

    def location(self) -> str:
        parts: list[str] = []
        if self.file:
            parts.append(self.file + (f":{self.line}" if self.line is not None else ""))
        if self.item:
            parts.append(f"item {self.item!r}")
        if self.field:
            parts.append(f"field {self.field!r}")
        return ", ".join(parts)

    def __str__(self) -> str:
        where = self.location()
        text = f"{where}: {self.message}" if where else self.message
        if self.hint:
            text += f" (hint: {self.hint})"
        return text


class InputError(ItemevalError):
    """Bad input: a study file, dataset, template, pricing file or store contents.

    Carries one or more `Problem`s; the message lists them all so a user can fix a file in one go.
    """

    exit_code = ExitCode.BAD_INPUT

    def __init__(self, problems: Problem | list[Problem] | str, *, hint: str | None = None):
        if isinstance(problems, str):
            problems = [Problem(problems, hint=hint)]
        elif isinstance(problems, Problem):
            problems = [problems]
        self.problems: list[Problem] = [p for p in problems if p.severity == "error"] or problems
        shown = self.problems[:20]
        lines = [str(p) for p in shown]
        if len(self.problems) > len(shown):
            lines.append(f"... and {len(self.problems) - len(shown)} more problems")
        super().__init__("\n".join(lines))


class ConfigError(InputError):
    """The study file (or a file it names) is invalid."""


class DatasetError(InputError):
    """A dataset directory or data file is invalid."""


class DatasetChangedError(InputError):
    """A dataset differs from the version pinned in `dataset_locks.json`."""


class StoreError(InputError):
    """The store holds something unreadable or inconsistent (a corrupt fragment, a wrong schema)."""


class StorageCapabilityError(StoreError):
    """The storage location lacks a guarantee the store relies on: exclusive creation (an
    object store that overwrites on a conditional PUT, a filesystem without hard links)."""


class ImportRefused(InputError):
    """`import --strict` met a record it would reject: the import writes nothing."""

    exit_code = ExitCode.IMPORT_REFUSED


class GateDeclined(ItemevalError):
    """The remaining estimate is above `confirm_above_usd` and nobody said yes."""

    exit_code = ExitCode.GATE_DECLINED


class BudgetExceeded(ItemevalError):
    """The remaining estimate, or the spend during a run, would cross `budget.max_usd`."""

    exit_code = ExitCode.BUDGET_CAP


class StoreFailedMidRun(ItemevalError):
    """The store (or its contents) failed after the run had begun writing: its manifest and
    some rows may be stored, so this is not bad input (exit 2 means nothing was written). What
    was written is kept; the message and the run's manifest say what; the same command
    continues once the store works."""

    exit_code = ExitCode.STORE_FAILED


# -- signals that cross packages (not `ItemevalError`s: each caller turns them into something) --


class TransientFailure(Exception):
    """An attempt failed in a way that another attempt may fix."""

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        http_status: int | None = None,
        retry_after_s: float | None = None,
        request_id: str | None = None,
        sent: bool = True,
    ):
        """`sent=False`: the attempt never reached the provider (the connection was refused):
        it cannot have been billed (`attempts.py`)."""
        super().__init__(message)
        self.sent = sent
        self.code = code
        self.message = message
        self.http_status = http_status
        self.retry_after_s = retry_after_s
        self.request_id = request_id


class MalformedBody(Exception):
    """A 2xx body that is not the documented shape (becomes `malformed_response`)."""


class PermitsUnavailable(Exception):
    """The endpoint's limiter did not answer for longer than the wait allows: the call is not
    sent (it ends as `connection_error`; a later run retries the cell)."""


class BatchApiError(Exception):
    """A batch API call failed (the message is redacted)."""

    def __init__(self, message: str, *, status: int | None = None, transient: bool = False):
        super().__init__(redact(message))
        self.status = status
        self.transient = transient


class UncertainCreate(BatchApiError):
    """A create call failed in a way that may have created the batch (its answer was lost)."""


class TemplateFieldError(KeyError):
    """A placeholder names a field the values do not have."""

    def __init__(self, name: str, available: list[str]):
        self.name = name
        self.available = available
        super().__init__(name)

    def __str__(self) -> str:
        shown = ", ".join(self.available[:30])
        return f"unknown template field {{{{ {self.name} }}}} (available: {shown})"


class ScorerError(RuntimeError):
    """A custom scorer raised, or returned something that is not a `Score` (a bug in it)."""


class LedgerUnavailable(Exception):
    """The ledger did not answer for `source_timeout_s`: no call may be sent under a cap."""


class LimiterUnreachable(Exception):
    """The machine's limiter file could not be opened or locked in time."""

    def __init__(self, message: str, *, cannot_open: bool = False):
        super().__init__(message)
        self.cannot_open = cannot_open


class DamagedLog(Exception):
    """An imported log that cannot be read: its rejection (the import counts it and goes on)."""

    def __init__(self, rejection: Rejection) -> None:
        super().__init__(rejection.reason)
        self.rejection = rejection


class NotSent(Exception):
    """An attempt was not sent: its call's larger reservation did not fit under the cap."""

    def __init__(self, result: ModelResult):
        super().__init__(result.error_message)
        self.result = result


class Stopped(Exception):
    """A compaction's merge was asked to stop (the run was interrupted)."""


class Vanished(Exception):
    """A fragment or the summary changed since the partition was listed: try again."""


class WorkerLost(Exception):
    """The worker running a shard died (its process, or its node); not the shard's fault."""


class Interrupted(asyncio.CancelledError):
    """Cancellation, carrying the calls that finished before it."""

    def __init__(self, outcome: CallOutcome):
        super().__init__()
        self.outcome = outcome

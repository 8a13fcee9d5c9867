"""Exceptions and exit codes.

Every failure a user can cause or meet has one exception class here, and every class carries the
exit code the CLI returns for it. Messages name the place (file, line, item, field) and say what
to do; they never contain secrets (see `itemeval.secrets`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


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

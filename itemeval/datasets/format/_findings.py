"""Where a finding is (`Where`) and a bounded log of findings while streaming data (`ProblemLog`).

Reading a million items can produce a million identical warnings ("JSON true read as True"):
the log keeps a few examples of each kind and counts the rest, and stops collecting errors after
a cap so that a broken file fails fast with a useful, short message.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from itemeval.errors import DatasetError, InputError, Problem


@dataclass(frozen=True, slots=True)
class Where:
    """The place findings refer to: a file, a line (a row for parquet), an item identifier."""

    file: str | None = None
    line: int | None = None
    item: str | None = None

    def at(self, *, line: int | None = None, item: str | None = None) -> Where:
        # called for every row read: a plain constructor is several times faster than replace()
        return Where(self.file, line if line is not None else self.line, item or self.item)

    def error(self, message: str, *, field: str | None = None, hint: str | None = None) -> Problem:
        return Problem(
            message, file=self.file, line=self.line, item=self.item, field=field, hint=hint
        )

    def warning(
        self, message: str, *, field: str | None = None, hint: str | None = None
    ) -> Problem:
        return Problem(
            message,
            file=self.file,
            line=self.line,
            item=self.item,
            field=field,
            hint=hint,
            severity="warning",
        )


class ProblemLog:
    """Errors (up to `max_errors`) and warnings (a few examples per kind, all counted)."""

    def __init__(self, max_errors: int = 50, examples_per_kind: int = 3):
        self.max_errors = max_errors
        self.examples_per_kind = examples_per_kind
        self.errors: list[Problem] = []
        self.error_count = 0
        self.warnings: list[Problem] = []
        self.warning_counts: Counter[tuple[str | None, str]] = Counter()

    def add(self, problem: Problem) -> None:
        if problem.severity == "error":
            self.error_count += 1
            if len(self.errors) < self.max_errors:
                self.errors.append(problem)
            return
        kind = (problem.field, problem.message)
        self.warning_counts[kind] += 1
        if self.warning_counts[kind] <= self.examples_per_kind:
            self.warnings.append(problem)

    def extend(self, problems: list[Problem]) -> None:
        for problem in problems:
            self.add(problem)

    @property
    def full(self) -> bool:
        """Enough errors collected to report; reading further would only add noise."""
        return self.error_count >= self.max_errors

    @property
    def warning_count(self) -> int:
        return sum(self.warning_counts.values())

    def warning_lines(self) -> list[str]:
        """Every warning example, then one line per kind that had more than its examples."""
        lines = [str(w) for w in self.warnings]
        for (field, message), count in self.warning_counts.items():
            extra = count - self.examples_per_kind
            if extra > 0:
                where = f"field {field!r}: " if field else ""
                more = "warning" if extra == 1 else "warnings"
                lines.append(f"... and {extra:,} more {more} like: {where}{message}")
        return lines

    def raise_if_errors(self, error_class: type[InputError] = DatasetError) -> None:
        if not self.error_count:
            return
        problems = list(self.errors)
        if self.full:
            problems.append(
                Problem(f"stopped reading after {self.max_errors} errors; fix these and run again")
            )
        raise error_class(problems)

"""What one run may spend: what `budget.max_usd` leaves this command, and what
`budget.study_max_usd` leaves the study.

    allowance = run_allowance(plan, spent_before=pilot.spent_usd)
    allowance.check(remaining_estimate)       # BudgetExceeded (exit 4) before anything is sent
    cap = allowance.cap                       # the run's ledger holds it (None: no cap)

* `max_usd` bounds one command: `run --pilot` and the rest share it (the rest gets what the
  pilot left), so one command never spends more than `max_usd`.
* `study_max_usd` bounds everything the study's store records as spent, across invocations: the
  spend each run's manifest recorded, and for a run that never recorded an end (killed), what
  its stored rows cost (`store.runs_spend`). A run gets what is left of it.

Both are held by the run's ledger exactly as `max_usd` always was: every call reserves its
worst case first (`spend.py`, `shard_calls.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

from itemeval.errors import BudgetExceeded
from itemeval.planning import Plan
from itemeval.store import StudyStore, runs_spend


@dataclass(frozen=True, slots=True)
class Allowance:
    max_usd: float | None  # budget.max_usd
    spent_before: float  # what this command spent before this run (a pilot)
    study_max_usd: float | None  # budget.study_max_usd
    study_usd_before: float | None  # the study's recorded spend before this run (with a study cap)

    @property
    def cap(self) -> float | None:
        """The most this run may spend (None: no cap)."""
        caps = []
        if self.max_usd is not None:
            caps.append(max(0.0, self.max_usd - self.spent_before))
        if self.study_max_usd is not None:
            caps.append(max(0.0, self.study_max_usd - (self.study_usd_before or 0.0)))
        return min(caps) if caps else None

    def check(self, remaining_usd: float) -> None:
        """Refuse the run (exit 4, nothing sent) when the study has nothing left under
        `study_max_usd`, or the estimate of what is left to do is above the allowance."""
        cap = self.cap
        if cap is None:
            return
        if self.study_max_usd is not None and cap <= 0 and remaining_usd > 0:
            raise BudgetExceeded(
                f"the study has spent ${self.study_usd_before or 0.0:,.4f} of "
                f"budget.study_max_usd ${self.study_max_usd:,.4f}; nothing was started. Raise "
                "budget.study_max_usd in the study file to spend more on this study."
            )
        if remaining_usd > cap and (self.spent_before > 0 or cap != self.max_usd):
            raise BudgetExceeded(
                f"the estimated remaining cost ${remaining_usd:,.2f} is above what this run may "
                f"spend, ${cap:,.2f} ({self.describe()}); nothing was started. Narrow the run "
                "(--limit N, budget.policy: dev, --condition) or raise the cap in the study file."
            )

    def describe(self) -> str:
        """Where the allowance comes from, for messages."""
        parts = []
        if self.max_usd is not None:
            text = f"max_usd ${self.max_usd:,.4f}"
            if self.spent_before > 0:
                text += f", of which this command's pilot spent ${self.spent_before:,.4f}"
            parts.append(text)
        if self.study_max_usd is not None:
            parts.append(
                f"the study had spent ${self.study_usd_before or 0.0:,.4f} of study_max_usd "
                f"${self.study_max_usd:,.4f}"
            )
        return "; ".join(parts)

    def after(self, spent: float, study_total: float | None) -> str:
        """The exit-4 message's account: this run's spend beside the study's total (what the
        store records, this run included; None when it could not be read)."""
        text = f"this run spent ${spent:,.4f} of its allowance ${self.cap or 0.0:,.4f} ("
        text += self.describe() + ")"
        if study_total is not None:
            text += f"; the study has spent ${study_total:,.4f} in all, over every run"
        return text

    def how_to_go_on(self) -> str:
        if self.study_max_usd is not None and self.cap == max(
            0.0, self.study_max_usd - (self.study_usd_before or 0.0)
        ):
            return "raise budget.study_max_usd to spend more on this study"
        return "raise budget.max_usd, or run again for a new allowance"


def run_allowance(plan: Plan, *, spent_before: float = 0.0) -> Allowance:
    """The allowance of a run of `plan` (reads the store's manifests under `study_max_usd`)."""
    budget = plan.study.budget
    study_before = None
    if budget.study_max_usd is not None:
        study_before = runs_spend(plan.store).study_usd
    return Allowance(budget.max_usd, spent_before, budget.study_max_usd, study_before)


def study_spent(store: StudyStore) -> float | None:
    """What the study's store records as spent over every run (None when it cannot be read:
    the message that shows it must not fail the run's end)."""
    try:
        return runs_spend(store).study_usd
    except Exception:
        return None

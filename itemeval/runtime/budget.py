"""Spend during a run: what shards reported, plus a reservation for the shards in flight.

Dispatch asks `can_start(estimate)` before each shard: the spend so far, the reservations of the
shards in flight and the new shard's estimate must stay within `max_usd`. Reservations are the
shard estimates scaled by how far actual spend has run over the estimates so far, so an
estimate that was too low does not let in-flight work cross the cap.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class BudgetTracker:
    max_usd: float | None
    spent: float = 0.0
    _reserved: dict[int, float] = field(default_factory=dict)
    _estimated_done: float = 0.0
    capped: bool = False

    @property
    def overrun(self) -> float:
        """Actual over estimated spend of finished shards (at least 1)."""
        if self._estimated_done <= 0:
            return 1.0
        return max(1.0, self.spent / self._estimated_done)

    @property
    def reserved(self) -> float:
        return sum(self._reserved.values()) * self.overrun

    def can_start(self, estimate: float) -> bool:
        if self.max_usd is None:
            return True
        allowed = self.spent + self.reserved + estimate * self.overrun <= self.max_usd + 1e-12
        if not allowed:
            self.capped = True
        return allowed

    def start(self, shard_id: int, estimate: float) -> None:
        self._reserved[shard_id] = estimate

    def finish(self, shard_id: int, actual: float) -> None:
        self._estimated_done += self._reserved.pop(shard_id, 0.0)
        self.spent += actual

    def release(self, shard_id: int) -> None:
        """A shard that failed and will be dispatched again: its reservation is returned."""
        self._reserved.pop(shard_id, None)

"""The endpoints' shared rate limiters on a Ray cluster (`itemeval limiters`);
docs/python-api.md.

    for info in itemeval.list_limiters():          # this machine's cluster, or RAY_ADDRESS
        print(info.name, info.state)
    itemeval.remove_limiters(["sim-openai"])        # no names: all of them

Every driver on a cluster that calls an endpoint shares one limiter actor (its requests and
tokens per minute, its concurrency). It outlives the jobs and exits by itself after 5 idle
minutes; remove one at once to declare other limits for its endpoint. Ray is imported only
when these are called.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from itemeval.errors import InputError, Problem

if TYPE_CHECKING:
    from itemeval.runtime import LimiterInfo


def list_limiters(address: str | None = None) -> list[LimiterInfo]:
    """Every itemeval limiter on the Ray cluster at `address` (default: `RAY_ADDRESS`, else
    this machine's), each with its state (None when it did not answer)."""
    from itemeval.runtime import list_limiters as listed

    with _cluster_problem():
        return listed(address or "auto")


def remove_limiters(names: Sequence[str] | None = None, *, address: str | None = None) -> list[str]:
    """Remove the named limiters (all of them when `names` is None); returns the
    names removed. Jobs still running against a removed limiter create it again at their next
    call."""
    from itemeval.runtime import remove_limiters as removed

    with _cluster_problem():
        return removed(address or "auto", None if names is None else list(names))


@contextmanager
def _cluster_problem() -> Iterator[None]:
    try:
        yield
    except ConnectionError as exc:
        raise InputError(
            Problem(
                f"no Ray cluster to ask: {exc}",
                field="address",
                hint="pass the cluster's address (--address HOST:PORT) or set RAY_ADDRESS",
            )
        ) from None

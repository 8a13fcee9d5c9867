"""The endpoints' limiter actors on a cluster: list them, remove them (`itemeval limiters`).

A limiter is shared by every driver that calls its endpoint and, on a cluster, outlives them
(detached). It exits by itself once no job has used it for `LIMITER_IDLE_EXIT_S`; these
functions let an operator see them and remove one at once, e.g. to declare other limits for an
endpoint while a limiter with the old ones is still alive.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, cast

from itemeval.runtime._actors import LIMITER_PREFIX
from itemeval.runtime._cluster import NAMESPACE, ray_cluster


@dataclass(frozen=True, slots=True)
class LimiterInfo:
    name: str
    state: dict[str, Any] | None  # None when the limiter did not answer (restarting?)


def list_limiters(address: str | None) -> list[LimiterInfo]:
    """Every itemeval limiter on the cluster at `address` (or `RAY_ADDRESS`), with its state."""
    with ray_cluster(address, quiet=True):
        import ray

        out = []
        for name in _limiter_names(ray):
            state: dict[str, Any] | None = None
            with contextlib.suppress(Exception):
                actor = ray.get_actor(name, namespace=NAMESPACE)
                # The actor's reply, which Ray's types cannot know.
                state = cast("dict[str, Any]", ray.get(actor.state.remote(), timeout=10))
            out.append(LimiterInfo(name, state))
        return out


def remove_limiters(address: str | None, names: list[str] | None) -> list[str]:
    """Kill the named limiters (all of them when `names` is None); returns the names removed.
    Jobs still running against a removed limiter create it again at their next call."""
    with ray_cluster(address, quiet=True):
        import ray

        present = _limiter_names(ray)
        wanted = present if names is None else [n for n in names if n in present]
        for name in wanted:
            with contextlib.suppress(ValueError):
                ray.kill(ray.get_actor(name, namespace=NAMESPACE), no_restart=True)
        return wanted


def _limiter_names(ray: Any) -> list[str]:
    actors = ray.util.list_named_actors(all_namespaces=True)
    return sorted(
        a["name"]
        for a in actors
        if a.get("namespace") == NAMESPACE and a["name"].startswith(LIMITER_PREFIX)
    )

"""Connecting to Ray: an existing cluster (`--address`, or `RAY_ADDRESS` under `ray job
submit`), or a local Ray started for the run and stopped after it."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

#: The Ray namespace of every named actor itemeval creates (limiters, ledgers).
NAMESPACE = "itemeval"


@dataclass(frozen=True)
class Cluster:
    cpus: int
    address: str | None  # None: a local Ray started by this process
    shared: bool  # True on a cluster that outlives this driver (limiters are detached there)


@contextmanager
def ray_cluster(address: str | None, *, quiet: bool = False) -> Iterator[Cluster]:
    import ray

    address = address or os.environ.get("RAY_ADDRESS") or None
    started = False
    if not ray.is_initialized():
        options = {
            "namespace": NAMESPACE,
            "logging_level": logging.WARNING,
            "log_to_driver": not quiet,
        }
        if address:
            ray.init(address=address, **options)
        else:
            ray.init(include_dashboard=False, **options)
        started = True
    try:
        cpus = int(ray.cluster_resources().get("CPU", 1))
        yield Cluster(cpus=max(1, cpus), address=address, shared=bool(address))
    finally:
        if started:
            ray.shutdown()

"""The machine's limiter: one endpoint's limits, held together by every itemeval process on it.

Two runs on one machine (each its own process, with or without a local Ray of its own) that call
one endpoint hold its requests and tokens per minute and its concurrency together: every process
draws its rate permits and leases its concurrency slots from one `EndpointLimiter` (the same
object a Ray cluster keeps in its limiter actor) kept in a file per endpoint identity,
`<limits dir>/<identity>.json`. A call (a batch of permits, a lease change or its renewal: a few
dozen a second per busy process, never one per request) takes the file's lock (`flock`), reads the
limiter, applies the call and writes the limiter back.

Why a file under a lock rather than a limiter process:

* nothing to start, find, keep alive or restart: the first caller creates the file, and the
  kernel releases a lock when its holder dies, so a run killed mid-call never leaves the limiter
  stuck nor takes it along;
* a process that is gone is known at once: leases and jobs are named by process id, and a lease
  whose process has exited gives its slots back at the next call (a Ray cluster has to wait for
  the 15 s expiry);
* one call costs tens of microseconds (docs/decisions/0004-machine-limiter.md has the figure),
  where a socket round trip to another process costs about as much and adds a process to look
  after.

Process ids are the machine's: processes that share the folder from another pid namespace (a
container with the folder mounted) would look gone, so give each its own folder.

The clock is the machine's monotonic clock, the same in every process; a file written before the
machine last started (another boot id) is started afresh. A file that cannot be read back (its
writer killed between writing and truncating) starts afresh as a restarted limiter does on a
cluster: an empty bucket (no burst) and a pool that lets no holder grow until every live holder
has re-reported what it uses (`ConcurrencyPool(restarted=True)`).

A caller that cannot take the lock within `LOCK_WAIT_S` (another process holds it and does not
let go: stopped in a debugger, say), or cannot open the file, gets `LimiterUnreachable`; the
`RateLimiter` and `LeasedSlots` say so in the log, keep asking, and after their
`source_timeout_s` fail the waiting calls as `connection_error`. No call is sent without a permit.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

from itemeval.errors import ConfigError, LimiterUnreachable, Problem
from itemeval.providers._settings import EndpointSettings
from itemeval.providers.limits._endpoint import (
    EndpointLimiter,
    EndpointLimits,
    endpoint_identity,
    endpoint_limits,
)
from itemeval.providers.limits._ratebucket import Grant

T = TypeVar("T")
log = logging.getLogger("itemeval.limits")

#: The folder of the machine's limiter files (default: a folder of this user's under
#: `$XDG_RUNTIME_DIR`, else under the system's temporary folder).
LIMITS_DIR_ENV = "ITEMEVAL_LIMITS_DIR"
#: How long a caller tries to take a limiter's lock before it says the limiter is unreachable.
LOCK_WAIT_S = 1.0
#: Between two tries of a lock another process holds.
LOCK_RETRY_S = 0.001
#: A version of the file's layout; a file of another version starts afresh.
FILE_VERSION = 3


class _Busy(Exception):
    """Another process holds the lock right now."""


def limits_dir() -> Path:
    """Where this machine's limiter files are (`ITEMEVAL_LIMITS_DIR` to choose)."""
    chosen = os.environ.get(LIMITS_DIR_ENV)
    if chosen:
        return Path(chosen)
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    return Path(base) / f"itemeval-limits-{os.getuid()}"


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as handle:
            return handle.read().strip()
    except OSError:
        return ""


_BOOT_ID = _boot_id()


def pid_of(holder: str) -> int | None:
    """The process id a holder or job name starts with (`<pid>-...` or `<pid>`), if any."""
    head = holder.split("-", 1)[0]
    return int(head) if head.isdigit() else None


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


class MachineLimiter:
    """One endpoint's limiter file (see the module doc). Synchronous; `try_call` never blocks."""

    def __init__(
        self,
        name: str,
        limits: EndpointLimits,
        directory: str | Path | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.path = Path(directory if directory is not None else limits_dir()) / f"{name}.json"
        self.limits = limits
        self._clock = clock
        self._fd: int | None = None
        self._pid = 0

    # -- the operations --------------------------------------------------------------------
    def configure(self, job: str) -> str | None:
        """Attach `job` (a process id); a text saying why not when a live job runs this
        endpoint with other limits. Limits that no live job holds are replaced."""
        return self.call(lambda limiter: self._configure(limiter, job))

    def detach(self, job: str) -> None:
        self.call(lambda limiter: limiter.detach(job))

    def state(self) -> dict[str, Any]:
        return self.call(lambda limiter: limiter.state())

    def call(self, method: Callable[[EndpointLimiter], T], wait_s: float = LOCK_WAIT_S) -> T:
        """`method` applied under the lock, waiting (blocking) up to `wait_s` for it."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                return self.try_call(method)
            except _Busy:
                if time.monotonic() >= deadline:
                    raise self._unreachable(wait_s) from None
                time.sleep(LOCK_RETRY_S)

    def try_call(self, method: Callable[[EndpointLimiter], T]) -> T:
        """`method` applied to the limiter under the file's lock; `_Busy` when another process
        holds the lock now, `LimiterUnreachable` when the file cannot be opened."""
        fd = self._open()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _Busy from None
        try:
            limiter = self._load(fd)
            result = method(limiter)
            self._store(fd, limiter)
            return result
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)

    def close(self) -> None:
        if self._fd is not None and self._pid == os.getpid():
            with contextlib.suppress(OSError):
                os.close(self._fd)
        self._fd = None

    # -- internals ---------------------------------------------------------------------------
    def _unreachable(self, waited: float) -> LimiterUnreachable:
        return LimiterUnreachable(
            f"the machine's limiter {self.path} has been locked by another process for "
            f"{waited:.1f} s"
        )

    def _open(self) -> int:
        if self._fd is None or self._pid != os.getpid():  # a forked child opens its own
            try:
                self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            except OSError as exc:
                raise LimiterUnreachable(
                    f"cannot open the machine's limiter {self.path}: {exc.strerror or exc} "
                    f"(set {LIMITS_DIR_ENV} to a folder this user can write)",
                    cannot_open=True,
                ) from exc
            self._pid = os.getpid()
        return self._fd

    def _configure(self, limiter: EndpointLimiter, job: str) -> str | None:
        problem = limiter.conflict(self.limits)
        if problem is None:
            limiter.attach(job)
        return problem

    def _fresh(self, *, restarted: bool) -> EndpointLimiter:
        return EndpointLimiter(self.limits, restarted=restarted, clock=self._clock, job_ttl_s=None)

    def _load(self, fd: int) -> EndpointLimiter:
        raw = os.pread(fd, 1 << 22, 0)
        if not raw:
            return self._fresh(restarted=False)
        try:
            state = json.loads(raw)
            if state["version"] != FILE_VERSION or state["boot"] != _BOOT_ID:
                return self._fresh(restarted=False)
            limiter = EndpointLimiter(
                EndpointLimits(*state["limits"]),
                restarted=state["restarted"],
                clock=self._clock,
                job_ttl_s=None,
            )
            limiter.bucket.restore(state["bucket"])
            limiter.pool.restore(state["pool"])
            limiter.restore_jobs(state["jobs"], state["last_use"])
        except (ValueError, KeyError, TypeError):
            return self._fresh(restarted=True)  # a writer killed mid-write: start safe
        self._forget_the_gone(limiter)
        if not limiter.jobs() and limiter.conflict(self.limits) is not None:
            # No live run holds the old limits: this caller's are the endpoint's now. Processes
            # that still hold slots re-report them before anyone grows (a restarted pool).
            return self._fresh(restarted=bool(limiter.pool.lease_holders()))
        return limiter

    @staticmethod
    def _forget_the_gone(limiter: EndpointLimiter) -> None:
        for holder in limiter.pool.lease_holders():
            pid = pid_of(holder)
            if pid is not None and not process_alive(pid):
                limiter.pool.drop(holder)
        for job in limiter.jobs():
            pid = pid_of(job)
            if pid is not None and not process_alive(pid):
                limiter.detach(job)

    def _store(self, fd: int, limiter: EndpointLimiter) -> None:
        jobs, last_use = limiter.job_state()
        state = {
            "version": FILE_VERSION,
            "boot": _BOOT_ID,
            "limits": [
                limiter.limits.requests_per_minute,
                limiter.limits.tokens_per_minute,
                limiter.limits.max_concurrency,
            ],
            "restarted": limiter.restarted,
            "bucket": limiter.bucket.snapshot(),
            "pool": limiter.pool.snapshot(),
            "jobs": jobs,
            "last_use": last_use,
        }
        data = json.dumps(state, separators=(",", ":")).encode()
        os.pwrite(fd, data, 0)
        os.ftruncate(fd, len(data))


class MachineLimiterSource:
    """Permits and concurrency slots from the machine's limiter (a `PermitSource` and a
    `SlotSource`), for the calls of one process. Waits for a lock another process holds for up
    to `lock_wait_s`, without blocking the event loop, then raises `LimiterUnreachable`."""

    def __init__(self, limiter: MachineLimiter, *, lock_wait_s: float = LOCK_WAIT_S):
        self.limiter = limiter
        self._lock_wait_s = lock_wait_s

    async def _call(self, method: Callable[[EndpointLimiter], T]) -> T:
        started: float | None = None
        while True:
            try:
                return self.limiter.try_call(method)
            except _Busy:
                now = time.monotonic()
                started = started if started is not None else now
                if now - started >= self._lock_wait_s:
                    raise self.limiter._unreachable(now - started) from None
                await asyncio.sleep(LOCK_RETRY_S)

    async def grant(
        self, requests: int, tokens: int, returned_tokens: int = 0, successes: int = 0
    ) -> Grant:
        return await self._call(
            lambda limiter: limiter.exchange(requests, tokens, returned_tokens, successes)
        )

    async def lease(self, holder: str, in_use: int, want: int) -> int:
        return await self._call(lambda limiter: limiter.lease(holder, in_use, want))

    async def report_429(self, retry_after_s: float | None) -> None:
        await self._call(lambda limiter: limiter.report_429(retry_after_s))


def machine_limiter(settings: EndpointSettings, directory: str | Path | None) -> MachineLimiter:
    """The machine's limiter of an endpoint (its file named by the endpoint's identity)."""
    return MachineLimiter(endpoint_identity(settings), endpoint_limits(settings), directory)


def machine_source(
    settings: EndpointSettings, directory: str | Path | None
) -> MachineLimiterSource | None:
    """Where a process on this machine draws the endpoint's permits and slots; None for the
    in-process simulator, whose limits are this process's own (no server is shared)."""
    if settings.in_process:
        return None
    return MachineLimiterSource(machine_limiter(settings, directory))


@contextlib.contextmanager
def attached(
    endpoints: Mapping[str, EndpointSettings], directory: str | Path | None
) -> Iterator[None]:
    """This process runs calls to `endpoints` (a run's driver): attach it to each endpoint's
    machine limiter for the `with` block. Limits that differ from those a live run declared
    for the same endpoint are refused (`ConfigError`, naming both), as on a cluster; a limiter
    locked by another process is waited for by the calls themselves (said in the log)."""
    job = str(os.getpid())
    held: list[MachineLimiter] = []
    problems: list[Problem] = []
    for name, settings in endpoints.items():
        if settings.in_process:
            continue
        limiter = machine_limiter(settings, directory)
        try:
            conflict = limiter.configure(job)
        except LimiterUnreachable as exc:
            if exc.cannot_open:
                problems.append(Problem(str(exc), field=f"endpoints.{name}"))
            else:
                log.warning("%s; this run's calls wait for it", exc)
            continue
        if conflict:
            problems.append(
                Problem(
                    f"{conflict} (a run on this machine holds them)",
                    field=f"endpoints.{name}",
                    hint="declare the same limits as the running run, or wait for it to end",
                )
            )
            continue
        held.append(limiter)
    try:
        if problems:
            raise ConfigError(problems)
        yield
    finally:
        for limiter in held:
            with contextlib.suppress(LimiterUnreachable, OSError):
                limiter.detach(job)
            limiter.close()

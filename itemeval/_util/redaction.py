"""Secrets scrubbed from text: every secret this process has read and every credential its
environment holds, replaced by `***` (public as `itemeval.secrets.redact`; here, at the bottom,
because the exceptions of `itemeval.errors` redact their messages and `itemeval.secrets` raises
them)."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from typing import Any

_KNOWN: set[str] = set()
_LOCK = threading.Lock()
_MASK = "***"
_MIN_LENGTH = 6  # shorter values are too likely to be ordinary words to scrub

#: Parts of an environment variable's name (split at `_`) that mark its value as a credential.
_SECRET_NAME_PARTS = frozenset(
    {"KEY", "APIKEY", "SECRET", "TOKEN", "PASSWORD", "PASSWD", "CREDENTIAL", "CREDENTIALS", "SAS"}
)


def remember(value: str) -> None:
    """Scrub `value` from everything `redact` sees from now on (in this process)."""
    if len(value) >= _MIN_LENGTH:
        with _LOCK:
            _KNOWN.add(value)


def is_secret_variable(name: str) -> bool:
    """True when the environment variable `name` holds a credential by its name's parts
    (`AWS_SECRET_ACCESS_KEY`, `RAY_AUTH_TOKEN`; not `PWD` or `KEYBOARD`)."""
    parts = name.upper().split("_")
    return any(part in _SECRET_NAME_PARTS for part in parts) or "CONNECTION_STRING" in name.upper()


_SECRET_NAMES: dict[Any, bool] = {}  # a variable's name (as the environment stores it) -> secret?


def environment_secrets() -> Iterator[str]:
    """The values of this process's credential variables (`is_secret_variable`).

    Read on every call (a variable set later counts), from the environment's own dict when
    CPython exposes it: decoding every name and value through `os.environ` cost 50 us a call
    on the 2-vCPU development machine, this 9 us (36 variables)."""
    raw = getattr(os.environ, "_data", None)
    if not isinstance(raw, dict):
        raw = dict(os.environ)
    for name, value in list(raw.items()):
        secret = _SECRET_NAMES.get(name)
        if secret is None:
            text = os.fsdecode(name) if isinstance(name, bytes) else str(name)
            secret = _SECRET_NAMES[name] = is_secret_variable(text)
        if secret and len(value) >= _MIN_LENGTH:
            yield os.fsdecode(value) if isinstance(value, bytes) else str(value)


def redact(text: str) -> str:
    """`text` with every secret this process has read, and every credential in its
    environment, replaced by `***`."""
    if not text:
        return text
    with _LOCK:
        known = _KNOWN | set(environment_secrets())
    for value in sorted(known, key=len, reverse=True):
        if value in text:
            text = text.replace(value, _MASK)
    return text

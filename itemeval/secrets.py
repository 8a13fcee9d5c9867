"""API keys: read from the environment at the last moment, never stored, never printed.

Configs name the *variable* (`api_key_env: OPENAI_API_KEY`), never the key. `Secret` wraps a value
so that `repr`, `str`, f-strings, pydantic dumps and pickles used in logs show `***`. Every key
that was read is remembered in this process so `redact()` can scrub it from any text that leaves
itemeval (error messages from providers, exception text, log lines).
"""

from __future__ import annotations

import os
import threading

from itemeval.errors import ConfigError, Problem

_KNOWN: set[str] = set()
_LOCK = threading.Lock()
_MASK = "***"


class Secret:
    """A secret string that does not show itself."""

    __slots__ = ("_value",)

    def __init__(self, value: str):
        self._value = value
        if len(value) >= 6:
            with _LOCK:
                _KNOWN.add(value)

    def reveal(self) -> str:
        """The value, for the one place that puts it on the wire (an HTTP header)."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    def __str__(self) -> str:
        return _MASK

    def __format__(self, spec: str) -> str:
        return _MASK

    def __reduce__(self) -> tuple[object, ...]:
        # Ray pickles actor arguments; keys travel by variable name instead (see `read_key`).
        raise TypeError("Secret values are not serialisable; pass the variable name instead")

    def __bool__(self) -> bool:
        return bool(self._value)


def read_key(env_name: str, *, field: str | None = None, required: bool = True) -> Secret | None:
    """Read the API key from the environment variable `env_name`.

    A missing or empty variable is a config error naming the variable (never a value).
    """
    value = os.environ.get(env_name, "")
    if not value:
        if not required:
            return None
        raise ConfigError(
            Problem(
                f"environment variable {env_name} is not set",
                field=field,
                hint=f"export {env_name}=... in the shell (or the Ray runtime_env) that runs "
                "itemeval; keys are never read from files",
            )
        )
    return Secret(value)


def redact(text: str) -> str:
    """`text` with every secret this process has read replaced by `***`."""
    if not text:
        return text
    with _LOCK:
        known = sorted(_KNOWN, key=len, reverse=True)
    for value in known:
        if value in text:
            text = text.replace(value, _MASK)
    return text

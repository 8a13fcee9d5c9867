"""Secrets: read from the environment at the last moment, never stored, never printed.

Configs name the *variable* (`api_key_env: OPENAI_API_KEY`, `headers_env`, a storage option's
`secret_env: MINIO_SECRET`), never the value; `credential_problem` refuses a study that holds one
(a credential-looking header, storage option or value). `Secret` wraps a value so that `repr`,
`str`, f-strings, pydantic dumps and pickles used in logs show `***`. `redact()` scrubs from any
text that leaves itemeval (error messages from providers, exception text, log lines, manifests)
every secret this process has read and every credential its environment holds (the value of a
variable whose name has a part `KEY`, `SECRET`, `TOKEN`, `PASSWORD`, ...: `AWS_SECRET_ACCESS_KEY`,
`AWS_SESSION_TOKEN`, `RAY_AUTH_TOKEN`, `HF_TOKEN`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

# the scrubbing itself sits under `itemeval.errors` (its exceptions redact their messages);
# its names are public here
from itemeval._util.redaction import _MASK, remember
from itemeval._util.redaction import environment_secrets as environment_secrets
from itemeval._util.redaction import is_secret_variable as is_secret_variable
from itemeval._util.redaction import redact as redact
from itemeval.errors import ConfigError, Problem

#: Where a missing variable must be set. Not a Ray job's `runtime_env`: its `env_vars` are
#: part of the job's description, which the dashboard and `ray job list` show (docs/cluster.md).
KEY_HINT = (
    "export {variable}=... in the environment of the process that runs itemeval (on a Ray "
    "cluster: of `ray start` on every node, docs/cluster.md; not a job's runtime_env, whose "
    "env_vars Ray's job list shows); secrets are never read from the study file"
)


class Secret:
    """A secret string that does not show itself."""

    __slots__ = ("_value",)

    def __init__(self, value: str):
        self._value = value
        remember(value)

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
                hint=KEY_HINT.format(variable=env_name),
            )
        )
    return Secret(value)


# --------------------------------------------------------------------------- study files

#: Header or option names that carry a credential, whole or as a part (split at `-`, `_`).
_CREDENTIAL_PARTS = frozenset(
    {
        "authorization",
        "auth",
        "token",
        "secret",
        "password",
        "passwd",
        "cookie",
        "key",
        "apikey",
        "signature",
        "credential",
        "credentials",
        "sas",
    }
)
#: Whole option names that carry a credential in fsspec backends (s3fs, gcsfs, adlfs, ...).
_CREDENTIAL_NAMES = frozenset({"connection_string", "client_secret", "account_key"})
#: Names with a credential-like part that are not credentials (an S3 KMS key's id, a request's
#: idempotency key).
_NOT_CREDENTIALS = frozenset(
    {"kms_key_id", "ssekmskeyid", "key_prefix", "idempotency-key", "x-idempotency-key"}
)
#: gcsfs `token` values that choose a way to authenticate rather than hold a credential.
_AUTH_METHODS = frozenset({"anon", "google_default", "cloud", "browser", "cache"})
#: Values that are credentials whatever their name: HTTP auth schemes, well-known key shapes.
_CREDENTIAL_VALUE = re.compile(
    r"^\s*(?:(?:bearer|basic|token|digest)\s+\S"
    r"|sk-|sk_|rk_|pk_live|ghp_|gho_|github_pat_|glpat-|xox[abpr]-|hf_[A-Za-z0-9]{20}"
    r"|AKIA[A-Z0-9]{12}|ASIA[A-Z0-9]{12}|AIza[0-9A-Za-z_-]{20}|eyJ[A-Za-z0-9_-]{10,}\.)",
    re.IGNORECASE,
)
#: An option whose name ends so names the variable that holds the value (`secret_env: VAR`).
ENV_SUFFIX = "_env"
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")


def is_credential_name(name: str) -> bool:
    """True when a header or option called `name` carries a credential (`X-Auth-Token`,
    `x-api-key`, `aws_secret_access_key`, `secret`; not `X-Request-Id` or `endpoint_url`)."""
    lowered = name.lower()
    if lowered in _NOT_CREDENTIALS:
        return False
    parts = re.split(r"[-_.]", lowered)
    return lowered in _CREDENTIAL_NAMES or any(p in _CREDENTIAL_PARTS for p in parts)


def looks_like_credential(value: object) -> bool:
    """True when `value` has the shape of a credential (`Bearer ...`, `sk-...`, `AKIA...`)."""
    return isinstance(value, str) and bool(_CREDENTIAL_VALUE.match(value))


def credential_problem(name: str, value: object) -> str | None:
    """Why the study may not hold `name: value` (a header or a storage option), or None."""
    if is_credential_name(name) and not (name.lower() == "token" and value in _AUTH_METHODS):
        return f"{name!r} carries a credential"
    if looks_like_credential(value):
        return f"the value of {name!r} looks like a credential"
    return None


def option_problems(options: Mapping[str, Any], where: str) -> list[str]:
    """Every credential that storage `options` (nested dicts too) hold instead of naming its
    variable, as `where.path: why; what to do` (a value is never repeated)."""
    found: list[str] = []
    for name, value in options.items():
        field = f"{where}.{name}"
        if name.endswith(ENV_SUFFIX) and isinstance(value, str):
            if not _ENV_NAME.match(value):
                found.append(f"{field}: must be the NAME of an environment variable")
            continue
        if isinstance(value, Mapping):
            found += option_problems(value, field)
            continue
        if value is None or isinstance(value, bool):
            continue
        why = credential_problem(name, value)
        if why is not None:
            found.append(
                f"{field}: {why}; a study file names the variable that holds it "
                f"({name}{ENV_SUFFIX}: SOME_VARIABLE), or leaves S3 credentials to the "
                "environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_PROFILE)"
            )
    return found


def options_from_environment(options: Mapping[str, Any]) -> dict[str, Any]:
    """`options` with each `NAME_env: VARIABLE` replaced by `NAME: <the variable's value>`
    (nested dicts too), each value remembered for `redact`. A missing variable is a
    `ConfigError` naming it."""
    resolved: dict[str, Any] = {}
    for name, value in options.items():
        if isinstance(value, Mapping):
            resolved[name] = options_from_environment(value)
        elif name.endswith(ENV_SUFFIX) and isinstance(value, str) and _ENV_NAME.match(value):
            secret = read_key(value, field=name)
            assert secret is not None
            resolved[name.removesuffix(ENV_SUFFIX)] = secret.reveal()
        else:
            resolved[name] = value
    return resolved

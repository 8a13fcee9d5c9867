"""Identifiers and content hashes: the canonical JSON form, condition ids, run ids, slugs.

Condition ids are a contract (`../shared/design.md`): `<slug>--<sha256(canonical JSON)[:12]>`.
The canonical JSON form is fixed here once, so ids are identical across processes, machines and
Python versions: keys sorted, no whitespace, UTF-8, floats in their shortest repr, no NaN.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from datetime import UTC, datetime
from typing import Any

_SLUG_UNSAFE = re.compile(r"[^a-z0-9._-]+")


# `json.dumps` with these options builds an encoder per call; this one is built once (a
# content hash is taken per model call). Its output is `json.dumps`'s with the same options.
_CANONICAL_ENCODER = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


def canonical_json(payload: Any) -> str:
    """The one serialisation that content hashes are computed over."""
    return _CANONICAL_ENCODER.encode(payload)


def sha256_hex(data: str | bytes) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def content_hash(payload: Any) -> str:
    """sha256 of the canonical JSON of `payload`."""
    return sha256_hex(canonical_json(payload))


def slugify(text: str) -> str:
    """A readable, path- and URL-safe form of `text` (lower case, `[a-z0-9._-]`)."""
    slug = _SLUG_UNSAFE.sub("-", text.lower()).strip("-.")
    return re.sub(r"-{2,}", "-", slug) or "x"


def condition_id(slug: str, payload: dict[str, Any]) -> str:
    """`<slug>--<first 12 hex digits of sha256(canonical JSON of payload)>`."""
    return f"{slugify(slug)}--{content_hash(payload)[:12]}"


def new_sortable_id() -> str:
    """A unique id whose string order is its creation order (to the microsecond), e.g.
    `20261122T023909.123456Z-9f2c41ab`."""
    now = datetime.fromtimestamp(time.time(), tz=UTC)
    return now.strftime("%Y%m%dT%H%M%S.%fZ") + "-" + os.urandom(4).hex()

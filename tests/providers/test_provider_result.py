"""`ModelResult.priced` is `dataclasses.replace` written out: it must keep every other field,
including any field added later."""

from __future__ import annotations

import dataclasses

from itemeval.providers.types import ErrorCode, ModelResult, Usage


def _every_field_set() -> ModelResult:
    return ModelResult(
        ok=False,
        text="t",
        finish_reason="length",
        usage=Usage(input_tokens=3, output_tokens=4, cached_input_tokens=1, reasoning_tokens=2),
        latency_ms=12.5,
        request_id="req-1",
        error_code=ErrorCode.SERVER_ERROR,
        error_message="boom",
        http_status=503,
        attempts=3,
        usd=0.25,
    )


def test_priced_is_replace_for_every_field():
    result = _every_field_set()
    assert result.priced(1.5) == dataclasses.replace(result, usd=1.5)
    assert result.priced(1.5, attempts=7) == dataclasses.replace(result, usd=1.5, attempts=7)
    # a field added to ModelResult and not to `priced` would come back as its default here
    defaults = ModelResult(ok=True)
    changed = [
        f.name
        for f in dataclasses.fields(ModelResult)
        if f.name not in ("usd", "attempts")
        and getattr(result.priced(0.0), f.name) == getattr(defaults, f.name)
    ]
    assert changed == [], f"priced() drops {changed}"

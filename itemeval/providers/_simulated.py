"""`SimProvider`: the simulator as an in-process `Provider` (endpoint kind `sim`, no base_url).

It goes through the same machinery as the HTTP clients (the endpoint's `RateLimiter`, the
tenacity `RetryPolicy`, the per-attempt timeout and `deadline_s`), so injected faults are
retried, 429s pause the limiter and latency occupies concurrency slots exactly as a real
endpoint's would.
"""

from __future__ import annotations

import asyncio
import itertools
import os

from itemeval.providers._deadline import AttemptDeadline
from itemeval.providers._failures import failure
from itemeval.providers._retry import RetryPolicy, TransientFailure
from itemeval.providers._settings import EndpointSettings
from itemeval.providers._transport import estimate_tokens
from itemeval.providers.limits import PermitsUnavailable, RateLimiter
from itemeval.providers.types import ErrorCode, ModelRequest, ModelResult, Usage
from itemeval.simulator import ReplyTokens, Simulator

_PROCESS_TAG = os.urandom(3).hex()
_COUNTER = itertools.count(1)


class SimProvider:
    """In-process simulated provider."""

    def __init__(self, settings: EndpointSettings, *, limiter: RateLimiter):
        self.settings = settings
        self.limiter = limiter
        self.simulator = Simulator(settings.sim_settings)
        self._retry = RetryPolicy(
            max_attempts=settings.max_attempts,
            backoff_initial_s=settings.backoff_initial_s,
            backoff_max_s=settings.backoff_max_s,
            max_retry_after_s=settings.max_retry_after_s,
            max_rate_limited_attempts=settings.max_rate_limited_attempts,
        )

    async def complete(self, request: ModelRequest) -> ModelResult:
        estimate = estimate_tokens(request)

        async def attempt() -> ModelResult:
            return await self._attempt(request, estimate)

        try:
            return await self._retry.run(attempt)
        except asyncio.CancelledError:
            raise
        except PermitsUnavailable as exc:  # waited long enough for the limiter: not sent
            return failure(ErrorCode.CONNECTION_ERROR, str(exc))
        except Exception as exc:
            return failure(ErrorCode.INTERNAL, f"internal error in the simulator: {exc!r}")

    async def aclose(self) -> None:
        await self.limiter.aclose()

    async def _attempt(self, request: ModelRequest, estimate: int) -> ModelResult:
        params = request.params
        request_id = f"sim-{_PROCESS_TAG}-{next(_COUNTER)}"
        async with (
            self.limiter.acquire(estimate) as permit,
            AttemptDeadline(self.settings.deadline_s, "the simulator"),
        ):
            reply = self.simulator.reply(
                request.model,
                request.messages,
                hints=request.sim_hints,
                max_tokens=params.max_tokens,
                reasoning_effort=params.reasoning_effort,
                thinking_budget=params.thinking_budget,
                structured=request.reply_schema is not None,
            )
            timeout = self.settings.timeout_s
            if reply.kind == "timeout" or reply.delay_s >= timeout:
                # The per-attempt timeout of a real client fires (or the hang ends first).
                await asyncio.sleep(min(timeout, self.settings.sim_settings.faults.hang_s))
                raise TransientFailure(
                    ErrorCode.TIMEOUT, f"no answer from the simulator within {timeout:g} s"
                )
            if reply.delay_s > 0:
                await asyncio.sleep(reply.delay_s)
            if reply.kind == "ok":
                permit.settle(reply.usage.input_tokens + reply.usage.output_tokens)
                if not reply.text.strip():
                    return failure(
                        ErrorCode.EMPTY_OUTPUT,
                        "the simulated model returned no text",
                        request_id=request_id,
                        finish_reason=reply.finish_reason,
                        usage=_usage(reply.usage),
                    )
                return ModelResult(
                    ok=True,
                    text=reply.text,
                    finish_reason=reply.finish_reason,
                    usage=_usage(reply.usage),
                    request_id=request_id,
                )
            if reply.kind == "unknown_model":
                return failure(ErrorCode.BAD_REQUEST, reply.message, request_id=request_id)
            if reply.kind == "malformed":
                return failure(ErrorCode.MALFORMED_RESPONSE, reply.message, request_id=request_id)
            if reply.kind == "empty":
                return failure(
                    ErrorCode.EMPTY_OUTPUT,
                    "the simulated model returned no text (injected)",
                    request_id=request_id,
                )
        if reply.kind == "rate_limit":
            await self.limiter.report_429(reply.retry_after_s)
            raise TransientFailure(
                ErrorCode.RATE_LIMITED,
                "simulated 429 (injected)",
                http_status=429,
                retry_after_s=reply.retry_after_s,
                request_id=request_id,
            )
        raise TransientFailure(
            ErrorCode.SERVER_ERROR,
            "simulated 500 (injected)",
            http_status=500,
            request_id=request_id,
        )


def _usage(tokens: ReplyTokens) -> Usage:
    return Usage(
        input_tokens=tokens.input_tokens,
        output_tokens=tokens.output_tokens,
        reasoning_tokens=tokens.reasoning_tokens,
    )

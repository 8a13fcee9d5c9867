"""`itemeval sim-server`: run the simulated provider as an HTTP server on 127.0.0.1.

It speaks the OpenAI (`/v1/chat/completions`, `/v1/models`, Files and Batches), Anthropic
(`/v1/messages`, Message Batches) and Gemini (`/v1beta/models/{model}:generateContent`) wire
formats, so official SDKs and our clients can call it. With `--port 0` it picks a free port;
either way it prints one line `listening on http://127.0.0.1:PORT` (flushed) once it accepts
connections, then serves until interrupted.

`python -m itemeval.cli.sim ARGS` runs the same command as `itemeval sim-server ARGS` without
loading the other command groups (tests and benchmarks use it to start servers quickly).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from itemeval._util.yaml_lines import safe_load
from itemeval.errors import ConfigError, ExitCode, ItemevalError, Problem


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "sim-server",
        help="run the simulated provider as a local HTTP server (OpenAI/Anthropic/Gemini wire)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--port", type=int, default=8089, help="TCP port (0 = any free port)")
    parser.add_argument("--seed", type=int, default=0, help="seed of answers, latency and faults")
    parser.add_argument("--models", type=Path, help="YAML file of models: NAME: {ability: 0.7}")
    group = parser.add_argument_group("latency")
    group.add_argument("--latency-ms", type=float, default=0.0, help="median latency")
    group.add_argument(
        "--latency-distribution", choices=("fixed", "uniform", "lognormal"), default="fixed"
    )
    group.add_argument(
        "--latency-spread", type=float, default=0.0, help="uniform: +-fraction; lognormal: sigma"
    )
    group = parser.add_argument_group("limits (enforced with 429s, as providers do)")
    group.add_argument("--rpm", type=int, help="requests per minute")
    group.add_argument("--tpm", type=int, help="tokens per minute")
    group.add_argument(
        "--burst-s", type=float, default=1.0, help="seconds of the rate the buckets hold"
    )
    group.add_argument(
        "--max-concurrency",
        type=int,
        help="requests in flight at once; an arrival beyond it gets a 429 (counted apart)",
    )
    group.add_argument(
        "--overreport-input", type=int, default=0, help="tokens added to every reported input"
    )
    group.add_argument(
        "--overreport-output",
        type=int,
        default=0,
        help="tokens added to every reported output (billed beyond max_tokens)",
    )
    group = parser.add_argument_group("injected faults (probability per request)")
    group.add_argument("--fault-429", type=float, default=0.0, help="429 with Retry-After")
    group.add_argument("--fault-500", type=float, default=0.0, help="500 server error")
    group.add_argument("--fault-timeout", type=float, default=0.0, help="hang for --hang-s")
    group.add_argument("--fault-malformed", type=float, default=0.0, help="truncated JSON body")
    group.add_argument("--fault-empty", type=float, default=0.0, help="empty content")
    group.add_argument(
        "--fault-never-answer",
        type=float,
        default=0.0,
        help="share of requests (by content: every attempt of one) that hang for --hang-s",
    )
    group.add_argument("--retry-after", type=float, default=0.5, help="Retry-After of fault 429s")
    group.add_argument("--hang-s", type=float, default=600.0, help="how long a timeout hangs")
    group = parser.add_argument_group("prompt caching (reported as each provider reports it)")
    group.add_argument(
        "--no-prompt-cache",
        action="store_true",
        help="report no cached tokens (caching is on by default, as at the providers)",
    )
    group.add_argument(
        "--cache-ttl-s",
        type=float,
        default=300.0,
        help="lifetime of a cache entry since its last use (Anthropic's 1h entries: 3600 s)",
    )
    group = parser.add_argument_group("batches (OpenAI Batch API, Anthropic Message Batches)")
    group.add_argument(
        "--batch-delay-s",
        type=float,
        default=1.0,
        help="time a batch takes: its requests finish evenly spread over it",
    )
    group.add_argument(
        "--batch-window-s",
        type=float,
        help="completion window in seconds (default 24 h); a batch unfinished then expires",
    )
    group.add_argument(
        "--batch-error-rate", type=float, default=0.0, help="share of batch requests that error"
    )
    group.add_argument(
        "--batch-expire",
        action="store_true",
        help="every batch expires after --batch-delay-s with nothing done",
    )
    group = parser.add_argument_group("judge")
    group.add_argument(
        "--judge-malformed-rate",
        type=float,
        default=0.0,
        help="share of judge answers that break the score contract",
    )
    parser.set_defaults(func=run_sim_server)


def _read_models(path: Path) -> dict[str, Any]:
    try:
        data = safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(Problem(f"cannot read the models file: {exc}", file=str(path))) from exc
    except yaml.YAMLError as exc:
        raise ConfigError(Problem(f"not valid YAML: {exc}", file=str(path))) from exc
    if isinstance(data, dict) and set(data) == {"models"}:
        data = data["models"]
    if not isinstance(data, dict):
        raise ConfigError(
            Problem(
                "expected a mapping of model names to {ability: ..., judge_accuracy: ...}",
                file=str(path),
            )
        )
    return data


def build_settings(args: argparse.Namespace) -> tuple[Any, Any]:
    """The simulator and server-limit settings from the parsed flags."""
    from itemeval.providers import SimSettings
    from itemeval.simulator import ServerLimits

    raw: dict[str, Any] = {
        "seed": args.seed,
        "judge_malformed_rate": args.judge_malformed_rate,
        "latency": {
            "distribution": args.latency_distribution,
            "median_ms": args.latency_ms,
            "spread": args.latency_spread,
        },
        "faults": {
            "rate_limit": args.fault_429,
            "server_error": args.fault_500,
            "timeout": args.fault_timeout,
            "malformed": args.fault_malformed,
            "empty": args.fault_empty,
            "never_answer": args.fault_never_answer,
            "retry_after_s": args.retry_after,
            "hang_s": args.hang_s,
        },
        "prompt_cache": {"enabled": not args.no_prompt_cache, "ttl_s": args.cache_ttl_s},
        "batch": {
            "delay_s": args.batch_delay_s,
            "window_s": args.batch_window_s,
            "error_rate": args.batch_error_rate,
            "force_expire": args.batch_expire,
        },
    }
    source = "command line"
    if args.models is not None:
        raw["models"] = _read_models(args.models)
        source = str(args.models)
    try:
        settings = SimSettings.model_validate(raw)
    except ValidationError as exc:
        problems = [
            Problem(err["msg"], file=source, field=".".join(str(p) for p in err["loc"]))
            for err in exc.errors()
        ]
        raise ConfigError(problems) from None
    if args.burst_s <= 0:
        raise ConfigError(Problem("must be positive", field="--burst-s"))
    if args.max_concurrency is not None and args.max_concurrency < 1:
        raise ConfigError(Problem("must be at least 1", field="--max-concurrency"))
    if args.overreport_input < 0 or args.overreport_output < 0:
        raise ConfigError(Problem("must be 0 or more", field="--overreport-output"))
    limits = ServerLimits(
        args.rpm,
        args.tpm,
        args.burst_s,
        args.max_concurrency,
        overreport_input=args.overreport_input,
        overreport_output=args.overreport_output,
    )
    return settings, limits


def run_sim_server(args: argparse.Namespace) -> int:
    settings, limits = build_settings(args)
    asyncio.run(_serve(settings, limits, args.port))
    return 0


async def _serve(settings: Any, limits: Any, port: int) -> None:
    from itemeval.simulator import start_server

    try:
        running = await start_server(settings, limits, port=port)
    except OSError as exc:
        raise ConfigError(
            Problem(f"cannot listen on 127.0.0.1:{port}: {exc}", field="--port")
        ) from exc
    print(f"listening on {running.url}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):  # non-Unix
            loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await running.stop()
        print("sim-server stopped", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    """`itemeval sim-server` on its own (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="itemeval")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["sim-server", *(sys.argv[1:] if argv is None else argv)])
    try:
        return int(args.func(args))
    except ItemevalError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return int(exc.exit_code)
    except KeyboardInterrupt:
        return int(ExitCode.INTERRUPTED)


if __name__ == "__main__":
    sys.exit(main())

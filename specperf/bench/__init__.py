"""`specperf bench --url URL ...`: measure a server that is already running.

Writes exactly the run summary of design.md to ``--output`` (plus ``summary.json`` and the
per-request ``requests.jsonl`` under ``--results-dir``) and prints a readable table. The engine
behind the URL is detected so its counters can be read; the API key comes from an environment
variable and is never printed or written.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from specperf.bench.output import format_nothing, format_table
from specperf.bench.prompts import load_bench_dataset, load_prompt_jsonl
from specperf.bench.server import (
    PROBE_TIMEOUT_S,
    Probe,
    _local_server_pid,
    connect,
    probe,
)
from specperf.engines.base import EngineRecord
from specperf.errors import ConfigError
from specperf.schemas import SamplingParams, WorkloadSpec

DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--url", required=True, help="base URL of the server, e.g. http://127.0.0.1:8000"
    )
    p.add_argument("--model", default=None, help="served model name (default: first /v1/models)")
    p.add_argument(
        "--dataset",
        required=True,
        help="a named set (mt-bench, humaneval, ...) or a JSONL file with a 'prompt' per line",
    )
    p.add_argument("--tier", default="full", help="tier of a named set (smoke|full)")
    p.add_argument("--concurrency", type=int, default=None, help="closed-loop slots (default 1)")
    p.add_argument("--serial", action="store_true", help="strictly serial (= --concurrency 1)")
    p.add_argument("--num-requests", type=int, default=32, help="measured requests (default 32)")
    p.add_argument(
        "--max-tokens", type=int, default=512, help="output tokens per request (default 512)"
    )
    p.add_argument("--temperature", type=float, default=0.0, help="sampling (default 0: greedy)")
    p.add_argument("--top-p", type=float, default=1.0, help="sampling (default 1.0)")
    p.add_argument("--top-k", type=int, default=-1, help="sampling (default -1: off)")
    p.add_argument("--min-p", type=float, default=0.0, help="sampling (default 0.0)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed sent with every request")
    p.add_argument("--no-seed", action="store_true", help="send no sampling seed")
    p.add_argument("--order-seed", type=int, default=0, help="seed of the request order")
    p.add_argument("--thinking", action="store_true", help="chat_template_kwargs.enable_thinking")
    p.add_argument(
        "--ignore-eos", action="store_true", help="generate max-tokens even past end-of-sequence"
    )
    p.add_argument(
        "--warmup", type=int, default=None, help="warmup requests (default: one per slot)"
    )
    p.add_argument(
        "--prefix-cache",
        choices=("reset", "disabled", "keep"),
        default="reset",
        help="reset the server's prefix cache after warmup (default), or leave it",
    )
    p.add_argument("--request-timeout", type=float, default=None, help="seconds per request")
    p.add_argument("--stall-timeout", type=float, default=60.0, help="seconds without data")
    p.add_argument("--deadline", type=float, default=1800.0, help="seconds for the whole run")
    p.add_argument(
        "--api-key-env",
        default=DEFAULT_API_KEY_ENV,
        metavar="VAR",
        help=f"environment variable holding the API key (default {DEFAULT_API_KEY_ENV})",
    )
    p.add_argument("--method", default=None, help="label: speculative method of the server")
    p.add_argument("--num-speculative-tokens", type=int, default=None, help="label: K")
    p.add_argument("--output", required=True, type=Path, help="run summary JSON to write")
    p.add_argument(
        "--results-dir",
        type=Path,
        default=None,
        help="where requests.jsonl and summary.json go (default: <output stem>-run/ beside it)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress lines")


def _environment() -> dict[str, Any]:
    """The environment record of the machine running the client (the server may be remote:
    its own configuration is in the engine record)."""
    from specperf.environment import environment_record

    env = environment_record()
    env["tool"] = "specperf bench"
    env["measured_from"] = "client machine"
    return env


def run(args: argparse.Namespace) -> int:
    from specperf.measure import measure
    from specperf.results import write_json_atomic

    if args.serial and args.concurrency not in (None, 1):
        raise ConfigError("--serial and --concurrency N>1 contradict each other")
    concurrency = 1 if args.serial else (args.concurrency or 1)
    for flag, value in (
        ("--concurrency", concurrency),
        ("--num-requests", args.num_requests),
        ("--max-tokens", args.max_tokens),
    ):
        if value < 1:
            raise ConfigError(f"{flag} must be >= 1, got {value}")
    if args.warmup is not None and args.warmup < 0:
        raise ConfigError(f"--warmup must be >= 0, got {args.warmup}")
    api_key = os.environ.get(args.api_key_env) or None
    if args.api_key_env != DEFAULT_API_KEY_ENV and api_key is None:
        raise ConfigError(f"--api-key-env {args.api_key_env}: that environment variable is not set")

    dataset = load_bench_dataset(args.dataset, args.tier)
    client, found = connect(args.url, args.model, api_key)
    sampling = SamplingParams(
        name="bench",
        temperature=args.temperature,
        top_p=args.top_p,
        top_k=args.top_k,
        min_p=args.min_p,
        seed=None if args.no_seed else args.seed,
        max_tokens=args.max_tokens,
        ignore_eos=args.ignore_eos,
        thinking=args.thinking,
    )
    workload = WorkloadSpec(
        concurrency=concurrency,
        num_requests=args.num_requests,
        warmup_requests=args.warmup,
        seed=args.order_seed,
        request_timeout_s=args.request_timeout,
        stall_timeout_s=args.stall_timeout,
        item_deadline_s=args.deadline,
        prefix_cache=args.prefix_cache,
    )
    out_dir = args.results_dir or args.output.with_name(f"{args.output.stem}-run")
    record = EngineRecord(
        kind=client.kind,
        label=client.kind,
        version=_safe_call(client.version),
        server_config=_safe_call(client.server_config) or {},
        pid=_local_server_pid(found.base),  # its CPU placement is recorded when local
    )
    run_info: dict[str, Any] = {
        "method": args.method,
        "num_speculative_tokens": args.num_speculative_tokens,
        "topology": {"method": args.method, "num_speculative_tokens": args.num_speculative_tokens},
    }
    step = max(1, args.num_requests // 10)

    def progress(done: int, total: int) -> None:
        if not args.quiet and (done % step == 0 or done == total):
            print(f"specperf bench: {done}/{total} requests", file=sys.stderr, flush=True)

    summary = measure(
        client,
        dataset,
        sampling,
        workload,
        out_dir,
        run_info=run_info,
        engine_record=record,
        environment={**_environment(), "detection": found.record()},
        progress=progress,
    )
    write_json_atomic(args.output, summary)
    print(
        f"specperf bench: {args.url}: {summary.get('num_requests')} requests at concurrency "
        f"{concurrency}, prompts from {args.dataset} ({len(dataset.items)} in the set); "
        f"engine {client.kind} ({found.record()['detected_by']})"
    )
    print(format_table(summary) if summary.get("completed") else format_nothing(summary))
    print(f"summary: {args.output}  requests: {out_dir / 'requests.jsonl'}")
    return 1 if summary.get("failed") or summary.get("engine_died") else 0


def _safe_call(fn: Any) -> Any:
    try:
        return fn()
    except Exception:
        return None


__all__ = [
    "DEFAULT_API_KEY_ENV",
    "PROBE_TIMEOUT_S",
    "Probe",
    "add_arguments",
    "connect",
    "format_nothing",
    "format_table",
    "load_bench_dataset",
    "load_prompt_jsonl",
    "probe",
    "run",
]

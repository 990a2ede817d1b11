"""`specperf bench --url URL ...`: measure a server that is already running.

Writes exactly the run summary of design.md to ``--output`` (plus ``summary.json`` and the
per-request ``requests.jsonl`` under ``--results-dir``) and prints a readable table. The engine
behind the URL is detected so its counters can be read; the API key comes from an environment
variable and is never printed or written.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from specperf.engines.base import EngineClient, EngineRecord, normalize_url
from specperf.errors import ConfigError, SpecperfError
from specperf.schemas import Dataset, PromptItem, SamplingParams, WorkloadSpec
from specperf.textfmt import fixed
from specperf.workload import is_refused

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


def load_prompt_jsonl(path: Path) -> Dataset:
    """``vllm bench serve --dataset-name custom`` format: one JSON object with a ``prompt``
    string per line (``id`` and ``category`` optional). Ids default to the line number."""
    items: list[PromptItem] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"--dataset {path}: cannot read ({exc.strerror})") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}:{n}: not valid JSON ({exc.msg})") from None
        if not isinstance(row, dict) or not isinstance(row.get("prompt"), str):
            raise ConfigError(f"{path}:{n}: field 'prompt' (a string) is missing")
        if not row["prompt"].strip():
            raise ConfigError(f"{path}:{n}: field 'prompt' is empty")
        item_id = str(row.get("id", f"line-{n:05d}"))
        items.append(
            PromptItem(
                id=item_id, category=str(row.get("category", "custom")), turns=(row["prompt"],)
            )
        )
    if not items:
        raise ConfigError(f"--dataset {path}: no prompts")
    ids = [it.id for it in items]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"--dataset {path}: duplicate 'id' values")
    canon = json.dumps([[it.id, it.category, it.turns[0]] for it in items], ensure_ascii=False)
    version = hashlib.sha256(canon.encode()).hexdigest()[:12]
    return Dataset(name=path.stem, version=version, items=tuple(items), tier="full")


def _is_prompt_jsonl(path: Path) -> bool:
    try:
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    row = json.loads(line)
                    return isinstance(row, dict) and "prompt" in row
    except (OSError, ValueError):
        return False
    return False


def load_bench_dataset(name_or_path: str, tier: str = "full") -> Dataset:
    """A JSONL file of prompts (read here, so bench works standalone) or a named set."""
    path = Path(name_or_path)
    if path.is_file() and _is_prompt_jsonl(path):
        return load_prompt_jsonl(path)
    try:
        from specperf.datasets import load_dataset
    except ImportError:
        if path.exists():
            raise ConfigError(f"--dataset {path}: not a JSONL file with a 'prompt' field") from None
        raise ConfigError(
            f"--dataset {name_or_path!r}: no such file, and named sets are not available"
        ) from None
    return load_dataset(name_or_path, tier=tier)


PROBE_TIMEOUT_S = 10.0
_METRIC_NAME = re.compile(r"^(?:# (?:TYPE|HELP) )?([A-Za-z_:][A-Za-z0-9_:]*)")


@dataclass
class Probe:
    """What the server at ``--url`` says about itself before anything is measured."""

    base: str
    metric_names: set[str] = field(default_factory=set)
    version_hint: str | None = None

    @property
    def family(self) -> str | None:
        """``vllm`` / ``sglang`` from the counter names on /metrics (the evidence that matters:
        it is where acceptance is read), else None."""
        for prefix in ("vllm", "sglang"):
            if any(n.startswith(f"{prefix}:") for n in self.metric_names):
                return prefix
        return None

    def record(self) -> dict[str, Any]:
        spec = sorted(
            n
            for n in self.metric_names
            if ("spec" in n or "verify" in n) and n.endswith("_total")  # the counter samples
        )
        return {
            "detected_by": "/metrics counter names" if self.family else "no known counters",
            "family": self.family,
            "spec_counter_names": spec[:20],
            "version_hint": self.version_hint,
        }


def probe(url: str, api_key: str | None) -> Probe:
    """GET /metrics (names only) and /version (a hint); one clear error when nothing answers."""
    base = normalize_url(url)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    found = Probe(base)
    hostport = urlsplit(base).netloc or base
    try:
        with httpx.Client(timeout=PROBE_TIMEOUT_S, headers=headers, trust_env=False) as http:
            met = http.get(f"{base}/metrics")
            if met.status_code == 200:
                found.metric_names = {
                    m.group(1) for line in met.text.splitlines() if (m := _METRIC_NAME.match(line))
                }
            try:
                ver = http.get(f"{base}/version")
                if ver.status_code == 200:
                    body = ver.json()
                    found.version_hint = (
                        str(body.get("version")) if isinstance(body, dict) else None
                    )
            except (httpx.HTTPError, ValueError):
                pass
    except httpx.ConnectError as exc:
        if is_refused(exc):
            msg = f"--url {url}: refused (nothing accepts connections at {hostport})"
            raise SpecperfError(msg) from None
        raise SpecperfError(f"--url {url}: cannot connect ({exc})") from None
    except httpx.TimeoutException:
        raise SpecperfError(f"--url {url}: no answer within {PROBE_TIMEOUT_S:g} s") from None
    except httpx.HTTPError as exc:
        raise SpecperfError(f"--url {url}: cannot reach the server ({exc})") from None
    return found


def connect(url: str, model: str | None, api_key: str | None) -> tuple[EngineClient, Probe]:
    """The client for ``url``: chosen by the counter names on /metrics (vLLM or SGLang), so
    acceptance is read wherever the counters are, whatever /version says; otherwise each engine
    module's detector, then a generic client without counters."""
    from specperf.engines import detect_client
    from specperf.engines.generic import GenericClient

    found = probe(url, api_key)
    client: EngineClient | None = None
    try:
        if found.family == "vllm":
            from specperf.engines.vllm import VllmClient

            client = VllmClient(found.base, model or "", api_key)
        elif found.family == "sglang":
            from specperf.engines.sglang import SglangClient

            client = SglangClient(found.base, model or "", api_key)
        if client is not None and not client.model:
            client.model = GenericClient.connect(found.base, None, api_key).model
        if client is None:
            client = detect_client(found.base, model, api_key)
    except ModuleNotFoundError as exc:
        if not (exc.name or "").startswith("specperf.engines"):
            raise
        client = GenericClient.connect(found.base, model, api_key)
    except SpecperfError:
        raise
    except Exception as exc:
        raise SpecperfError(f"--url {url}: cannot reach the server ({exc})") from None
    if not client.model:
        raise SpecperfError(f"--url {url}: no model name; pass --model")
    return client, found


def _environment() -> dict[str, Any]:
    """The environment record of the machine running the client (the server may be remote:
    its own configuration is in the engine record)."""
    from specperf.environment import environment_record

    env = environment_record()
    env["tool"] = "specperf bench"
    env["measured_from"] = "client machine"
    return env


def format_table(s: dict[str, Any]) -> str:
    """The summary as a readable plain-text table."""
    rows: list[tuple[str, str]] = [
        ("engine", f"{s.get('engine')} {s.get('engine_version') or ''}".strip()),
        ("model", str(s.get("model"))),
        ("dataset", f"{s.get('dataset')} ({s.get('dataset_version')})"),
        ("concurrency / requests", f"{s.get('concurrency')} / {s.get('num_requests')}"),
        ("completed / failed", f"{s.get('completed')} / {s.get('failed')}"),
        ("duration s", fixed(s.get("duration_s"))),
        ("output tokens", fixed(s.get("output_tokens"))),
        ("output throughput tok/s", fixed(s.get("output_throughput_tok_s"))),
    ]
    for key, label in (
        ("ttft_ms", "TTFT"),
        ("tpot_ms", "TPOT"),
        ("itl_ms", "ITL"),
        ("e2e_ms", "E2E"),
    ):
        d = s.get(key) or {}
        rows.append(
            (
                f"{label} ms mean/p50/p90/p99",
                " / ".join(fixed(d.get(k)) for k in ("mean", "p50", "p90", "p99")),
            )
        )
    for key, label in (("output_tok_s", "output tok/s"), ("decode_tok_s", "decode tok/s")):
        d = s.get(key) or {}
        rows.append(
            (
                f"per-request {label} min/p50/max",
                " / ".join(fixed(d.get(k)) for k in ("min", "p50", "max")),
            )
        )
    rows.append(("tokens per chunk", fixed(s.get("tokens_per_chunk"), 3)))
    rows.append(("acceptance rate", fixed(s.get("acceptance_rate"), 4)))
    rows.append(("mean acceptance length", fixed(s.get("mean_acceptance_length"), 4)))
    ppa = s.get("per_position_acceptance")
    rows.append(
        ("per-position acceptance", "-" if ppa is None else ", ".join(f"{x:.4f}" for x in ppa))
    )
    ev = s.get("evalscope_estimate") or {}
    rows.append(
        (
            "evalscope estimate L / rate",
            f"{fixed(ev.get('decoded_tokens_per_iter'), 3)} / "
            f"{fixed(ev.get('acceptance_rate'), 4)}",
        )
    )
    rows.append(
        (
            "server gen tokens / client usage",
            f"{fixed(s.get('server_generation_tokens'))} / {fixed(s.get('client_usage_tokens'))}",
        )
    )
    ol = s.get("output_length") or {}
    rows.append(("finish reasons", json.dumps(ol.get("finish_reasons", {}))))
    dl = s.get("delivery") or {}
    if dl:
        state = "DELIVERY-BOUND" if dl.get("bound") else "paced"
        rows.append(("delivery", f"{state}: {dl.get('reason', '')}"))
    width = max(len(k) for k, _ in rows)
    lines = [f"  {k.ljust(width)}  {v}" for k, v in rows]
    for err in s.get("errors") or []:
        lines.append(f"  error: {err}")
    for note in s.get("notes") or []:
        lines.append(f"  note: {note}")
    return "\n".join(lines)


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


def format_nothing(s: dict[str, Any]) -> str:
    """A run where no request completed: what was tried and why it failed, no table."""
    lines = [
        f"  nothing completed: 0 of {s.get('num_requests')} requests "
        f"({s.get('failed', 0) - s.get('not_sent', 0)} failed, {s.get('not_sent', 0)} not sent)"
    ]
    lines += [f"  error: {err}" for err in s.get("errors") or []]
    lines += [f"  note: {note}" for note in s.get("notes") or []]
    return "\n".join(lines)


def _local_server_pid(base: str) -> int | None:
    """The pid listening on the URL's port when the server runs on this host (loopback)."""
    parts = urlsplit(base)
    if parts.hostname not in ("127.0.0.1", "localhost", "::1") or not parts.port:
        return None
    from specperf.placement import listening_pid

    return listening_pid(parts.port)


def _safe_call(fn: Any) -> Any:
    try:
        return fn()
    except Exception:
        return None

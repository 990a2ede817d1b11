"""How faithfully does the measuring client time what the server emitted? specperf vs
`vllm bench serve`, side by side (a benchmark, not a test).

Setup (what the issue specifies): the calibration server in its own process on one core, the
client on another (this process is pinned there before anything starts; `vllm bench serve`
runs as its child and inherits the pin), 32 concurrent streams, 128 requests of 256 tokens, one
token per chunk (native), TTFT set to 50 ms, a chunk every 2.0 ms (16,000 chunks/s over 32
streams) or 1.0 ms (32,000). The server writes on an absolute schedule and records, per request,
when each chunk was handed to the socket (its /stats): that is the truth the clients are
compared with.

* TPOT error = client mean TPOT / server mean TPOT − 1 (same requests, same definition).
* TTFT overhead = client mean TTFT − server mean TTFT (request sent → first chunk handed over).

Rounds alternate the order of the two clients (ABBA); the figures are medians over rounds.

Run from the repo root, under the quiet lock:
  flock /tmp/specperf-quiet.lock .venv/bin/python -m benchmarks.client_distortion --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks.vllm_bench_client import run_vllm_bench, vllm_python, write_prompts
from specperf.metrics import summarize
from specperf.placement import LoadSnapshot, load_over
from specperf.schemas import PromptItem, SamplingParams, WorkloadSpec
from specperf.workload import rank_items, run_timed, run_workload
from specperf.workload import transport as workload_transport
from tests.calibration.client import CalibrationClient

ROOT = Path(__file__).resolve().parent.parent

STREAMS = 32
REQUESTS = 128
OUTPUT_TOKENS = 256
MAX_TOKENS = 512
TTFT_MS = 50.0
TPOT_LIMIT = 0.0025  # the bar: |TPOT error| <= 0.25 %


def start_server(cpu: int | None) -> tuple[subprocess.Popen[str], str]:
    def pin() -> None:
        if cpu is not None:
            os.sched_setaffinity(0, {cpu})

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
        preexec_fn=pin,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    m = re.search(r"(http://\S+)", line)
    if not m:
        proc.kill()
        sys.exit(f"calibration server did not start: {line!r}")
    return proc, m.group(1)


def post(url: str, path: str, body: Any = None) -> None:
    httpx.post(f"{url}{path}", json=body, trust_env=False).raise_for_status()


def server_stats(url: str) -> dict[str, Any]:
    return httpx.get(f"{url}/stats", trust_env=False).json()


def items() -> tuple[PromptItem, ...]:
    return tuple(
        PromptItem(id=f"d{i:04d}", category="bench", turns=(f"distortion prompt {i}",))
        for i in range(REQUESTS)
    )


def run_specperf(url: str) -> dict[str, Any]:
    client = CalibrationClient(url)
    workload = WorkloadSpec(concurrency=STREAMS, num_requests=REQUESTS, warmup_requests=0, seed=0)
    cpu0 = time.process_time()
    res = run_timed(run_workload(client, items(), SamplingParams(max_tokens=MAX_TOKENS), workload))
    cpu = time.process_time() - cpu0
    s = summarize(res, run_info={"method": "native"})
    return {
        "ttft_ms": s["ttft_ms"]["mean"],
        "tpot_ms": s["tpot_ms"]["mean"],
        "itl_ms": s["itl_ms"]["mean"],
        "completed": s["completed"],
        "client_cpu_s": cpu,
        "delivery_bound": s["delivery"]["bound"],
        "burst_request_share": s["delivery"]["burst_request_share"],
    }


def run_peer(url: str, python: str, tokenizer: str) -> dict[str, Any]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryDirectory() as tmp:
        pfile = Path(tmp) / "prompts.jsonl"
        write_prompts(pfile, [it.turns[0] for it in rank_items(items(), 0)])
        v = run_vllm_bench(
            python=python, base_url=url, model="calibration-model", tokenizer=tokenizer,
            prompts_file=pfile, num_prompts=REQUESTS, concurrency=STREAMS,
            max_tokens=MAX_TOKENS, temperature=0.0, out_dir=Path(tmp) / "out",
        )  # fmt: skip
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "ttft_ms": v.get("mean_ttft_ms"),
        "tpot_ms": v.get("mean_tpot_ms"),
        "itl_ms": v.get("mean_itl_ms"),
        "completed": v.get("completed"),
        # the whole child process (imports, tokenizer, dataset) — an upper bound
        "client_cpu_s": (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime),
    }


def one(url: str, who: str, rate: int, peer: tuple[str, str] | None) -> dict[str, Any]:
    post(url, "/stats/reset")
    snap = LoadSnapshot.take()
    c = run_specperf(url) if who == "specperf" else run_peer(url, *peer)  # type: ignore[misc]
    load = load_over(snap, LoadSnapshot.take())
    st = server_stats(url)
    row = {"client": who, "rate": rate, **c, "server": st}
    row["tpot_err"] = c["tpot_ms"] / st["mean_tpot_ms"] - 1 if c["tpot_ms"] else None
    row["ttft_over_ms"] = c["ttft_ms"] - st["mean_ttft_ms"] if c["ttft_ms"] else None
    row["itl_err"] = c["itl_ms"] / st["mean_itl_ms"] - 1 if c["itl_ms"] else None
    row["cpu_us_per_chunk"] = 1e6 * c["client_cpu_s"] / max(1, st["chunks"])
    row["load1"] = load["loadavg_before"][0]
    row["psi_some_share"] = load["cpu_pressure_some_share"]
    return row


def main() -> int:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.client_distortion", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--rates", default="16000,32000", help="target chunks/s over all streams")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--client-cpu", type=int, default=0)
    ap.add_argument("--server-cpu", type=int, default=1)
    ap.add_argument("--no-vllm", action="store_true", help="specperf only (no peer)")
    ap.add_argument("--vllm-python", default=None)
    ap.add_argument("--tokenizer", default=None, help="tokenizer dir for vllm bench (tiny model)")
    ap.add_argument("--transport", default=None, help="SPECPERF_HTTP_TRANSPORT for specperf")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "client_distortion.json")
    args = ap.parse_args()
    rates = [int(r) for r in args.rates.split(",")]
    if args.transport:
        workload_transport.TRANSPORT = args.transport
    peer = None
    if not args.no_vllm:
        tokenizer = args.tokenizer
        if not tokenizer:
            from specperf.testkit.models import ensure_tiny_model

            tokenizer = str(ensure_tiny_model())
        peer = (vllm_python(args.vllm_python), tokenizer)
    # the client's core: this process (and so the peer, its child) before any thread starts
    os.sched_setaffinity(0, {args.client_cpu})
    proc, url = start_server(args.server_cpu)
    rows: list[dict[str, Any]] = []
    clients = ["specperf", *(["vllm bench serve"] if peer else [])]
    try:
        for rnd in range(1, args.rounds + 1):
            for rate in rates:
                post(url, "/control", {
                    "ttft_s": TTFT_MS / 1000, "step_interval_s": STREAMS / rate,
                    "num_speculative_tokens": 0, "output_tokens": OUTPUT_TOKENS,
                    "prefix_caching": False,
                })  # fmt: skip
                for who in clients if rnd % 2 else clients[::-1]:
                    row = one(url, who, rate, peer)
                    row["round"] = rnd
                    rows.append(row)
                    print(
                        f"round {rnd} {rate:>6}/s {who:17} TPOT err {row['tpot_err'] * 100:+.3f} %"
                        f"  TTFT over {row['ttft_over_ms']:+.2f} ms  ITL err "
                        f"{row['itl_err'] * 100:+.3f} %  reached "
                        f"{row['server']['chunks_per_s']:.0f}/s  load {row['load1']:.2f}",
                        file=sys.stderr,
                        flush=True,
                    )
    finally:
        proc.terminate()
        proc.wait(10)
    table = summary(rows, rates, clients)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"rows": rows, "medians": table}, indent=1))
    print(f"figures: {args.out}")
    return 0


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def summary(
    rows: list[dict[str, Any]], rates: list[int], clients: list[str]
) -> list[dict[str, Any]]:
    out = []
    print(
        f"{'chunks/s':>8} {'client':17} {'rounds':>6} | {'TPOT err % (median, min..max)':>30} | "
        f"{'TTFT over ms (median)':>22} | {'ITL err %':>9} | {'reached/s':>9} | "
        f"{'CPU us/chunk':>12} | load1"
    )
    for rate in rates:
        for who in clients:
            rs = [
                r
                for r in rows
                if r["rate"] == rate and r["client"] == who and r["tpot_err"] is not None
            ]
            if not rs:
                continue
            te = [r["tpot_err"] * 100 for r in rs]
            tt = [r["ttft_over_ms"] for r in rs]
            d = {
                "rate": rate,
                "client": who,
                "rounds": len(rs),
                "tpot_err_pct": med(te),
                "tpot_err_pct_range": [min(te), max(te)],
                "ttft_over_ms": med(tt),
                "ttft_over_ms_range": [min(tt), max(tt)],
                "itl_err_pct": med([r["itl_err"] * 100 for r in rs]),
                "reached_chunks_s": med([r["server"]["chunks_per_s"] for r in rs]),
                "cpu_us_per_chunk": med([r["cpu_us_per_chunk"] for r in rs]),
                "load1": [round(r["load1"], 2) for r in rs],
            }
            out.append(d)
            print(
                f"{rate:>8} {who:17} {d['rounds']:>6} | {d['tpot_err_pct']:+8.3f} "
                f"({min(te):+.3f}..{max(te):+.3f}) {'':>5} | {d['ttft_over_ms']:+10.2f} "
                f"({min(tt):+.1f}..{max(tt):+.1f}) | {d['itl_err_pct']:+9.3f} | "
                f"{d['reached_chunks_s']:9.0f} | {d['cpu_us_per_chunk']:12.0f} | {d['load1']}"
            )
    for rate in rates:
        sp = next((d for d in out if d["rate"] == rate and d["client"] == "specperf"), None)
        pe = next((d for d in out if d["rate"] == rate and d["client"] != "specperf"), None)
        if sp is None:
            continue
        ok_tpot = abs(sp["tpot_err_pct"]) <= TPOT_LIMIT * 100
        line = f"{rate}/s: specperf |TPOT err| {abs(sp['tpot_err_pct']):.3f} % <= 0.25 %: {ok_tpot}"
        if pe is not None:
            line += (
                f"; TTFT overhead {sp['ttft_over_ms']:+.2f} ms vs peer "
                f"{pe['ttft_over_ms']:+.2f} ms: "
            )
            line += str(sp["ttft_over_ms"] <= pe["ttft_over_ms"])
        print(line)
    return out


if __name__ == "__main__":
    sys.exit(main())

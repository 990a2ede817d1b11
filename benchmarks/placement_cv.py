"""Start-to-start variation of cpu-tiny items with and without CPU placement (issue 15, item A).

Each round runs the chosen cpu-tiny items once per arm, arms alternating (ABBA over rounds),
every run a fresh `pytest -m perf` process and so a fresh engine start:

* ``none``  — the previous default: OpenMP threads bound to every core of the worker, API
  server, engine core and client floating (SPECPERF_CPU_PLACEMENT=none);
* ``split`` — specperf.placement: API server + client on the first core, engine on the rest.

Each pytest run takes /tmp/specperf-quiet.lock for itself (a few minutes at most), so other
timing runs interleave rather than wait for the whole benchmark. Afterwards it prints, per item
and arm, output tok/s of every start, the coefficient of variation across starts (sd/mean),
TTFT/TPOT medians, the delivery flag and the load, and writes them as JSON (--out).

Run from the repo root:  .venv/bin/python benchmarks/placement_cv.py --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ITEMS = ("vllm-native-mt-bench-c4", "vllm-ngram-mt-bench-c4")
ARMS = ("none", "split")
LOCK = "/tmp/specperf-quiet.lock"


def run_arm(arm: str, items: list[str], out: Path, python: str) -> int:
    env = {**os.environ, "SPECPERF_CPU_PLACEMENT": arm}
    cmd = [
        "flock", LOCK, "timeout", "590",
        python, "-m", "pytest", "-m", "perf", "-p", "no:cacheprovider", "-q",
        "-k", " or ".join(items), "--results-dir", str(out),
    ]  # fmt: skip
    with open(out.with_suffix(".log"), "w") as log:
        return subprocess.run(
            cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
        ).returncode


def collect(base: Path) -> list[dict[str, Any]]:
    rows = []
    for f in sorted(base.glob("r*-*/*/summary.json")):
        rnd, arm = f.parent.parent.name.split("-", 1)
        s = json.loads(f.read_text())
        env = s.get("environment") or {}
        load = env.get("load") or {}
        rows.append(
            {
                "round": int(rnd[1:]),
                "arm": arm,
                "item": f.parent.name,
                "tok_s": s.get("output_throughput_tok_s"),
                "ttft_p50_ms": (s.get("ttft_ms") or {}).get("p50"),
                "tpot_p50_ms": (s.get("tpot_ms") or {}).get("p50"),
                "mal": s.get("mean_acceptance_length"),
                "completed": s.get("completed"),
                "delivery_bound": (s.get("delivery") or {}).get("bound"),
                "burst_share": (s.get("delivery") or {}).get("burst_request_share"),
                "load1_before": (load.get("loadavg_before") or [None])[0],
                "psi_some_share": load.get("cpu_pressure_some_share"),
                "client_cpus": ((env.get("placement") or {}).get("client") or {}).get("cpus"),
                "engine_pid": ((env.get("engine") or {}).get("pid")),
            }
        )
    return rows


def cv(xs: list[float]) -> float | None:
    return statistics.stdev(xs) / statistics.mean(xs) if len(xs) > 1 else None


def report(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in sorted({r["item"] for r in rows}):
        for arm in ARMS:
            rs = sorted(
                (r for r in rows if r["item"] == item and r["arm"] == arm), key=lambda r: r["round"]
            )
            tok = [r["tok_s"] for r in rs if r["tok_s"]]
            if not tok:
                continue
            key = f"{item} [{arm}]"
            out[key] = {
                "starts": len(tok),
                "tok_s": [round(t, 1) for t in tok],
                "mean_tok_s": statistics.mean(tok),
                "cv": cv(tok),
                "ttft_p50_ms": [round(r["ttft_p50_ms"], 1) for r in rs if r["ttft_p50_ms"]],
                "tpot_p50_ms": [round(r["tpot_p50_ms"], 3) for r in rs if r["tpot_p50_ms"]],
                "delivery_bound": [r["delivery_bound"] for r in rs],
                "burst_share": [r["burst_share"] for r in rs],
                "load1_before": [
                    round(r["load1_before"], 2) for r in rs if r["load1_before"] is not None
                ],
                "psi_some_share": [
                    round(r["psi_some_share"], 2) for r in rs if r["psi_some_share"] is not None
                ],
                "mal": sorted({round(r["mal"], 4) for r in rs if r["mal"]}),
            }
            o = out[key]
            print(
                f"{key:42} starts {o['starts']}  tok/s {o['tok_s']}  mean {o['mean_tok_s']:.1f}  "
                f"CV {o['cv'] * 100 if o['cv'] is not None else float('nan'):.1f}%\n"
                f"{'':42} TTFT p50 {o['ttft_p50_ms']}  TPOT p50 {o['tpot_p50_ms']}\n"
                f"{'':42} delivery-bound {o['delivery_bound']} bursts {o['burst_share']}\n"
                f"{'':42} load1 {o['load1_before']}  PSI some {o['psi_some_share']}  MAL {o['mal']}"
            )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--first-round", type=int, default=1, help="resume: first round number")
    ap.add_argument("--items", default=",".join(ITEMS))
    ap.add_argument("--dir", type=Path, default=ROOT / "results" / "placement_cv")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--python", default=sys.executable)
    args = ap.parse_args()
    items = args.items.split(",")
    args.dir.mkdir(parents=True, exist_ok=True)
    if not args.report_only:
        for rnd in range(args.first_round, args.first_round + args.rounds):
            order = ARMS if rnd % 2 else ARMS[::-1]  # ABBA: drift hits both arms alike
            for arm in order:
                out = args.dir / f"r{rnd}-{arm}"
                t0 = time.time()
                rc = run_arm(arm, items, out, args.python)
                print(f"round {rnd} {arm}: rc {rc}, {time.time() - t0:.0f} s", flush=True)
    rows = collect(args.dir)
    summary = report(rows)
    (args.dir / "placement_cv.json").write_text(
        json.dumps({"rows": rows, "summary": summary}, indent=1)
    )
    print(f"figures: {args.dir / 'placement_cv.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

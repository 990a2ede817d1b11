"""An item's figures from its repeats: the median, one value per engine start, and an interval
(min–max of repeats, or a per-request bootstrap for a single run)."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from specperf.verdict.results import figure

BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_LEVEL = 0.95
# Metrics that get a per-request bootstrap interval: metric -> how to compute it.
_PER_REQUEST = {
    "output_throughput_tok_s": "ratio",
    "ttft_ms.p50": ("ttft", 50),
    "ttft_ms.p99": ("ttft", 99),
    "tpot_ms.p50": ("tpot", 50),
    "tpot_ms.p99": ("tpot", 99),
}


def aggregate(
    summaries: Sequence[Mapping[str, Any]],
    metrics: Iterable[str],
    requests: Sequence[Mapping[str, Any]] = (),
    *,
    fresh_starts: bool = False,
) -> dict[str, dict[str, Any]]:
    """Figures of an item from its repeats: median value, per-repeat samples, ``starts`` (one
    value per engine start: each repeat when ``fresh_starts``, else the median as ONE start —
    repeats on one start share its speed) and an interval (repeats: [min, max]; one run:
    bootstrap over ``requests`` where defined)."""
    out: dict[str, dict[str, Any]] = {}
    for metric in metrics:
        samples = [figure(s, metric) for s in summaries]
        vals = [v for v in samples if v is not None]
        if not vals:
            out[metric] = {"value": None}
            continue
        fig: dict[str, Any] = {"value": statistics.median(vals)}
        fig["starts"] = list(vals) if fresh_starts else [fig["value"]]
        if len(summaries) > 1:
            fig["samples"] = samples
            fig["interval"] = [min(vals), max(vals)]
            fig["interval_method"] = f"min–max of {len(vals)} repeats; value is the median"
        elif requests and metric in _PER_REQUEST:
            iv = bootstrap_interval(metric, fig["value"], requests)
            if iv is not None:
                fig["interval"] = list(iv)
                fig["interval_method"] = f"95% bootstrap over {len(requests)} requests"
        out[metric] = fig
    return out


def bootstrap_interval(
    metric: str, value: float, requests: Sequence[Mapping[str, Any]]
) -> tuple[float, float] | None:
    """95 % percentile-bootstrap interval of ``metric`` over an item's requests.

    Throughput: the relative spread of Σtokens/Σe2e over resampled requests, applied to the
    run's throughput (duration itself cannot be resampled). Percentiles: the percentile of the
    per-request TTFT or TPOT, recomputed on each resample."""
    import numpy as np

    how = _PER_REQUEST[metric]
    ok = [r for r in requests if not r.get("error") and r.get("e2e_s")]
    if len(ok) < 3:
        return None
    rng = np.random.default_rng(0)
    n = len(ok)
    idx = rng.integers(0, n, size=(BOOTSTRAP_RESAMPLES, n))
    lo_q, hi_q = (1 - BOOTSTRAP_LEVEL) / 2 * 100, (1 + BOOTSTRAP_LEVEL) / 2 * 100
    if how == "ratio":
        tok = np.array([float(r.get("output_tokens") or 0) for r in ok])
        e2e = np.array([float(r["e2e_s"]) for r in ok])
        if e2e.sum() <= 0 or tok.sum() <= 0:
            return None
        point = tok.sum() / e2e.sum()
        ratios = tok[idx].sum(axis=1) / e2e[idx].sum(axis=1) / point
        lo, hi = np.percentile(ratios, [lo_q, hi_q])
        return float(value * lo), float(value * hi)
    kind, pct = how
    per: list[float] = []
    for r in ok:
        ttft = r.get("ttft_s")
        if ttft is None:
            continue
        if kind == "ttft":
            per.append(float(ttft) * 1000)
        else:
            ntok = int(r.get("output_tokens") or 0)
            if ntok >= 2:
                per.append((float(r["e2e_s"]) - float(ttft)) / (ntok - 1) * 1000)
    if len(per) < 3:
        return None
    arr = np.array(per)
    idx = rng.integers(0, len(arr), size=(BOOTSTRAP_RESAMPLES, len(arr)))
    stats_ = np.percentile(arr[idx], pct, axis=1)
    lo, hi = np.percentile(stats_, [lo_q, hi_q])
    return float(lo), float(hi)

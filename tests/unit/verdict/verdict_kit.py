"""What the verdict tests share: one item key, its fingerprint and policies, a run's
summary and a baseline entry made to order, and a results folder written from summaries."""

from __future__ import annotations

import json
from pathlib import Path

from specperf import baselines as bl
from specperf import verdict as vd
from specperf.config import DEFAULT_METRICS, ItemKey, parse_rules

KEY = ItemKey("m", "vllm", "eagle3", "mt-bench", 4, "greedy")


FP = {"engine_label": "vllm", "num_requests": 16, "tier": "smoke"}


POL = dict(DEFAULT_METRICS)


def summary(
    key: ItemKey = KEY,
    tok_s: float = 100.0,
    mal: float | None = 2.5,
    rate=0.5,
    out_tokens: float = 1000.0,
    version: str = "0.33.0",
    failed: int = 0,
    profile: str = "hw",
    **extra,
) -> dict:
    figures = {
        "output_throughput_tok_s": {
            "value": tok_s,
            "interval": [tok_s * 0.97, tok_s * 1.03],
            "interval_method": "95% bootstrap over 16 requests",
        },
        "mean_acceptance_length": {"value": mal},
        "acceptance_rate": {"value": rate},
        "output_tokens": {"value": out_tokens},
        "completed": {"value": 16 - failed},
    }
    s = {
        "key": key.as_str(),
        "item_id": "x",
        "engine_version": version,
        "hardware_profile": profile,
        "fingerprint": dict(FP),
        "figures": figures,
        "completed": 16 - failed,
        "failed": failed,
        "output_throughput_tok_s": tok_s,
        "mean_acceptance_length": mal,
        "acceptance_rate": rate,
        "output_tokens": out_tokens,
        "concurrency": key.concurrency,
        "method": key.method,
        "sampling": {"name": "greedy", "temperature": 0.0},
    }
    s.update(extra)
    return s


def base_entry(
    tok_s=100.0,
    mal=2.5,
    rate=0.5,
    out_tokens=1000.0,
    version="0.32.0",
    fp=None,
    known=None,
    profile="hw",
    tok_starts=None,
) -> bl.BaselineEntry:
    if tok_starts is None:  # five engine starts, ~0.8 % apart, geometric mean = tok_s
        tok_starts = [tok_s * f for f in (1 / 1.01, 1 / 1.005, 1.0, 1.005, 1.01)]
    # the deterministic metrics: three identical starts, the least evidence that arms a gate
    figs = {
        "output_throughput_tok_s": {"value": tok_s, "starts": tok_starts},
        "mean_acceptance_length": {"value": mal, "starts": [mal] * 3},
        "acceptance_rate": {"value": rate, "starts": [rate] * 3},
        "output_tokens": {"value": out_tokens, "starts": [out_tokens] * 3},
        "completed": {"value": 16, "starts": [16] * 3},
    }
    e = bl.make_entry(
        KEY,
        figs,
        POL,
        fingerprint=fp or dict(FP),
        provenance={"engine_version": version},
        hardware_profile=profile,
    )
    for i, start in enumerate(e.metrics["output_throughput_tok_s"].starts or []):
        # five runs on five days: a speed gate (>= 2 days, >= 3 passes)
        start["date"] = f"2026-11-{16 + i}T20:00:00Z"
    e.known_issue = known
    return e


def by_metric(checks):
    return {c.metric: c for c in checks}


def results(*summaries: dict) -> dict[str, vd.ItemResult]:
    return {s["key"]: vd.ItemResult(s) for s in summaries}


def rules(*tables: dict):
    return list(parse_rules(list(tables), "<test>", engine_names=None))


def _write_results(root: Path, items: list[dict], snapshot: dict | None = None) -> None:
    for s in items:
        d = root / s["key"].replace("/", "_")
        d.mkdir(parents=True)
        (d / "summary.json").write_text(json.dumps(s))
    if snapshot is not None:
        (root / "suite.json").write_text(json.dumps(snapshot))

"""Per-request records + counter deltas → the run summary of design.md (contract).

Every definition here is design.md's: throughput over the measured duration with server-reported
output tokens, TTFT/TPOT/ITL/E2E percentiles, per-request output_tok_s and decode_tok_s, and
acceptance ONLY from engine counter deltas. The client-side evalscope estimate sits beside the
real value for comparison and is never gated.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import Counter as Tally
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from specperf.delivery import delivery_summary
from specperf.engines.base import NATIVE
from specperf.schemas import Counters, RequestRecord
from specperf.workload import WorkloadResult

SUMMARY_SCHEMA = "specperf.run/1"
MAX_ERRORS_SHOWN = 5
PERCENTILES = (50, 90, 99)


def stats(values: Iterable[float], scale: float = 1.0) -> dict[str, float | int | None]:
    """mean/p50/p90/p99 (numpy's linear interpolation, as vllm bench serve uses) and n."""
    arr = np.asarray([v * scale for v in values], dtype=float)
    if arr.size == 0:
        return {"mean": None, "p50": None, "p90": None, "p99": None, "n": 0}
    out: dict[str, float | int | None] = {"mean": float(arr.mean())}
    for p in PERCENTILES:
        out[f"p{p}"] = float(np.percentile(arr, p))
    out["n"] = int(arr.size)
    return out


def spread(values: Iterable[float]) -> dict[str, float | int | None]:
    """min/p50/max (and mean) of per-request rates."""
    arr = np.asarray(list(values), dtype=float)
    if arr.size == 0:
        return {"min": None, "p50": None, "max": None, "mean": None, "n": 0}
    return {
        "min": float(arr.min()),
        "p50": float(np.percentile(arr, 50)),
        "max": float(arr.max()),
        "mean": float(arr.mean()),
        "n": int(arr.size),
    }


def acceptance(delta: Counters) -> dict[str, Any]:
    """Acceptance from a counter delta: rate = acc/draft_tokens, MAL = 1 + acc/drafts,
    per-position[i] = acc_pos[i]/drafts. None where the counters are missing or Δdrafts = 0."""
    drafts, dtoks, acc = delta.drafts, delta.draft_tokens, delta.accepted_tokens
    out: dict[str, Any] = {
        "acceptance_rate": None,
        "mean_acceptance_length": None,
        "per_position_acceptance": None,
        "drafts": drafts,
        "draft_tokens": dtoks,
        "accepted_tokens": acc,
        "accepted_per_position": list(delta.accepted_per_position)
        if delta.accepted_per_position is not None
        else None,
    }
    if acc is not None and dtoks:
        out["acceptance_rate"] = acc / dtoks
    if acc is not None and drafts:
        out["mean_acceptance_length"] = 1.0 + acc / drafts
    if delta.accepted_per_position is not None and drafts:
        out["per_position_acceptance"] = [a / drafts for a in delta.accepted_per_position]
    return out


def evalscope_estimate(records: Sequence[RequestRecord]) -> dict[str, Any]:
    """evalscope's client-side guess: per request L = (tokens − 1)/(chunks − 1), mean over
    requests with L > 1, rate = 1 − 1/L. Chunks are content chunks here (evalscope also counts
    role/finish-only chunks, which biases its L low on short outputs)."""
    ls = []
    for r in records:
        chunks = len(r.chunk_times_s)
        if r.ok and chunks > 1 and r.output_tokens > 1:
            L = (r.output_tokens - 1) / (chunks - 1)
            if L > 1:
                ls.append(L)
    if not ls:
        return {"decoded_tokens_per_iter": None, "acceptance_rate": None, "requests": 0}
    mean_l = float(np.mean(ls))
    return {
        "decoded_tokens_per_iter": mean_l,
        "acceptance_rate": min(1.0, max(0.0, 1.0 - 1.0 / mean_l)),
        "requests": len(ls),
    }


def _tpot_s(r: RequestRecord) -> float | None:
    if r.ttft_s is None or r.e2e_s is None or r.output_tokens < 2:
        return None
    return (r.e2e_s - r.ttft_s) / (r.output_tokens - 1)


def _itls_s(r: RequestRecord) -> list[float]:
    t = r.chunk_times_s
    return [b - a for a, b in itertools.pairwise(t)]


def _output_lengths(ok: Sequence[RequestRecord]) -> dict[str, Any]:
    lens = [r.output_tokens for r in ok]
    return {
        "sum": int(sum(lens)),
        "mean": float(np.mean(lens)) if lens else None,
        "p50": float(np.percentile(lens, 50)) if lens else None,
        "min": int(min(lens)) if lens else None,
        "max": int(max(lens)) if lens else None,
        "finish_reasons": dict(sorted(Tally(r.finish_reason or "none" for r in ok).items())),
    }


def summarize(result: WorkloadResult, *, run_info: dict[str, Any]) -> dict[str, Any]:
    """The run summary (design.md contract; extra keys are ours). ``run_info`` supplies engine,
    engine_version, method, num_speculative_tokens, topology, model, dataset, concurrency,
    environment, ... and is copied in first; measured keys come after and win."""
    notes: list[str] = list(run_info.get("notes") or [])
    summary: dict[str, Any] = {
        "schema": SUMMARY_SCHEMA,
        "engine": None,
        "engine_version": None,
        "method": None,
        "num_speculative_tokens": None,
        "model": None,
        "dataset": None,
        "concurrency": None,
    }
    summary.update({k: v for k, v in run_info.items() if k != "notes"})

    recs = result.records
    ok = [r for r in recs if r.ok]
    failed = [r for r in recs if not r.ok]
    out_tokens = sum(r.output_tokens for r in ok)
    duration = result.duration_s
    errors = [f"{r.prompt_id}#{r.turn}: {r.error}" for r in failed[:MAX_ERRORS_SHOWN]]
    if result.not_sent:
        errors.append(
            f"{result.not_sent} requests not sent: {result.stop_reason or 'an earlier turn failed'}"
        )
    sources = Tally(r.output_tokens_source for r in ok)
    if sources.get("client"):
        notes.append(
            f"{sources['client']} requests had no usage.completion_tokens: output tokens counted "
            "by the client (token ids where returned, else content chunks)"
        )

    output_tok_s = [r.output_tokens / r.e2e_s for r in ok if r.e2e_s and r.output_tokens > 0]
    decode_tok_s = []
    for r in ok:
        tp = _tpot_s(r)
        if tp is not None and tp > 0:
            decode_tok_s.append(1.0 / tp)
    itls = [g for r in ok for g in _itls_s(r)]
    chunks = sum(len(r.chunk_times_s) for r in ok)

    summary.update(
        {
            "num_requests": result.num_requests,
            "completed": len(ok),
            "failed": len(failed) + result.not_sent,
            "not_sent": result.not_sent,
            "errors": errors,
            "engine_died": result.engine_died,
            "duration_s": duration,
            "output_tokens": out_tokens,
            "input_tokens": sum(r.prompt_tokens or 0 for r in ok),
            "output_throughput_tok_s": out_tokens / duration if duration > 0 else None,
            "request_throughput_req_s": len(ok) / duration if duration > 0 else None,
            "ttft_ms": stats((r.ttft_s for r in ok if r.ttft_s is not None), 1000.0),
            "tpot_ms": stats((t for r in ok if (t := _tpot_s(r)) is not None), 1000.0),
            "itl_ms": stats(itls, 1000.0),
            "e2e_ms": stats((r.e2e_s for r in ok if r.e2e_s is not None), 1000.0),
            "output_tok_s": spread(output_tok_s),
            "decode_tok_s": spread(decode_tok_s),
            "tokens_per_chunk": out_tokens / chunks if chunks else None,
            "output_tokens_source": dict(sorted(sources.items())),
            "output_length": _output_lengths(ok),
        }
    )
    delivery = delivery_summary(ok)
    summary["delivery"] = delivery
    if delivery["bound"]:
        notes.append(f"delivery-bound: {delivery['reason']}")

    # -- acceptance from counter deltas only ---------------------------------------------------
    delta = result.after.minus(result.before)
    acc = acceptance(delta)
    is_native = summary.get("method") == NATIVE
    if is_native:
        notes.append("native run: acceptance keys are null")
        for k in ("acceptance_rate", "mean_acceptance_length", "per_position_acceptance"):
            acc[k] = None
    elif delta.drafts is None or delta.accepted_tokens is None:
        notes.append("the engine exposes no speculative-decoding counters: acceptance is null")
    elif not delta.drafts:
        notes.append("Δdrafts = 0 over the run: no speculative steps, acceptance is null")
    summary.update(
        {
            "acceptance_rate": acc["acceptance_rate"],
            "mean_acceptance_length": acc["mean_acceptance_length"],
            "per_position_acceptance": acc["per_position_acceptance"],
            "spec_decode_counters": {
                k: acc[k]
                for k in ("drafts", "draft_tokens", "accepted_tokens", "accepted_per_position")
            },
            "evalscope_estimate": evalscope_estimate(ok),
        }
    )

    # -- server's view of generated tokens vs the client's usage sum ---------------------------
    client_usage = sum(r.output_tokens for r in recs if r.output_tokens_source == "usage")
    server_gen = delta.generation_tokens
    summary["server_generation_tokens"] = server_gen
    summary["client_usage_tokens"] = client_usage
    if server_gen is None:
        summary["generation_tokens_mismatch"] = None
    else:
        diff = server_gen - client_usage
        summary["generation_tokens_mismatch"] = diff
        if diff:
            why = " (failed requests also generate tokens)" if failed else ""
            notes.append(
                f"server generation-token delta {server_gen:g} differs from the client's usage "
                f"sum {client_usage} by {diff:+g}{why}"
            )

    hits, queries = delta.prefix_cache_hits, delta.prefix_cache_queries
    summary["prefix_cache"] = {
        "policy": run_info.get("prefix_cache_policy"),
        "reset": result.prefix_cache_reset,
        "queries": queries,
        "hits": hits,
        "hit_rate": hits / queries if hits is not None and queries else None,
    }
    summary["request_order"] = {
        "seed": result.seed,
        "hash": result.order_hash,
        "repeat_factor": result.repeat_factor,
        "ids": list(result.order),
    }
    summary["warmup_requests"] = result.warmup
    summary["counters"] = {
        "before": _counters_json(result.before),
        "after": _counters_json(result.after),
    }
    summary["notes"] = _dedupe([*result.notes, *notes])
    return summary


def _counters_json(c: Counters) -> dict[str, Any]:
    d = dataclasses.asdict(c)
    d["extra"] = dict(c.extra)
    return d


def _dedupe(items: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    return [x for x in items if not (x in seen or seen.add(x))]

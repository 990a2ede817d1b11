"""The run summary as text: the readable table, or what was tried when nothing completed."""

from __future__ import annotations

import json
from typing import Any

from specperf.textfmt import fixed


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


def format_nothing(s: dict[str, Any]) -> str:
    """A run where no request completed: what was tried and why it failed, no table."""
    lines = [
        f"  nothing completed: 0 of {s.get('num_requests')} requests "
        f"({s.get('failed', 0) - s.get('not_sent', 0)} failed, {s.get('not_sent', 0)} not sent)"
    ]
    lines += [f"  error: {err}" for err in s.get("errors") or []]
    lines += [f"  note: {note}" for note in s.get("notes") or []]
    return "\n".join(lines)

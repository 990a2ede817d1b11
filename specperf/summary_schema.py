"""The run summary's schema (design.md, "Run summary JSON": a contract; extra keys welcome) as
pydantic models.

``metrics.summarize`` and ``specperf bench --output`` write the summary; every reader of a
``summary.json`` (the verdict, the report, the history) checks it with ``check_summary`` first,
so a malformed file is a one-line ``ConfigError`` naming the file, the dotted key
(``ttft_ms.p50``) and the problem (``specperf.validation``) instead of a traceback or a silent
null later. The model checks the types of the contract's keys where they are present and
ignores every other key; keys are not required (a summary of an item that never measured, and
older results, leave some out), and the dict the reader goes on with is the file's, unchanged.
"""

from __future__ import annotations

from typing import Any, ClassVar

from specperf.validation import Integer, Number, Table, validate


class LatencyStats(Table):
    """``ttft_ms``, ``tpot_ms``, ``itl_ms``, ``e2e_ms``: milliseconds, null without samples."""

    unknown_key: ClassVar[str | None] = None
    mean: Number | None = None
    p50: Number | None = None
    p90: Number | None = None
    p99: Number | None = None


class EvalscopeEstimate(Table):
    """Acceptance estimated from chunk sizes, the way evalscope does (no engine counters)."""

    unknown_key: ClassVar[str | None] = None
    decoded_tokens_per_iter: Number | None = None
    acceptance_rate: Number | None = None


class RunSummary(Table):
    """One item's run summary: the contract's keys, typed; acceptance keys null for native runs
    and where the engine exposes no counters (``notes`` says which)."""

    unknown_key: ClassVar[str | None] = None
    engine: str | None = None
    engine_version: str | None = None
    method: str | None = None
    num_speculative_tokens: Integer | None = None
    model: str | None = None
    dataset: str | None = None
    concurrency: Integer | None = None
    completed: Integer | None = None
    failed: Integer | None = None
    duration_s: Number | None = None
    output_tokens: Number | None = None
    output_throughput_tok_s: Number | None = None
    ttft_ms: LatencyStats | None = None
    tpot_ms: LatencyStats | None = None
    itl_ms: LatencyStats | None = None
    e2e_ms: LatencyStats | None = None
    tokens_per_chunk: Number | None = None
    acceptance_rate: Number | None = None
    mean_acceptance_length: Number | None = None
    per_position_acceptance: list[Number] | None = None
    evalscope_estimate: EvalscopeEstimate | None = None
    server_generation_tokens: Number | None = None
    environment: dict[str, Any] | None = None
    notes: list[str] | None = None


def check_summary(data: Any, source: str) -> dict[str, Any]:
    """``data`` (a parsed ``summary.json``) checked against ``RunSummary``; returned as it is.
    A bad value is a one-line ConfigError: ``source: dotted.key: problem``."""
    validate(RunSummary, data, source, table="an object")
    return data


__all__ = ["EvalscopeEstimate", "LatencyStats", "RunSummary", "check_summary"]

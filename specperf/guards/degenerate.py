"""Degenerate outputs (repeated characters, n-gram loops) where native's output for the same
prompt is not degenerate."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from specperf.guards.common import (
    THRESHOLDS,
    GuardResult,
    Record,
    _output_text,
    pair_records,
    quote,
)

# ---- degenerate outputs ------------------------------------------------------------------


def degeneracy(seq: str | Sequence[int], t: Mapping[str, float] = THRESHOLDS) -> str | None:
    """Why ``seq`` (text or token ids) looks degenerate, or None. Two signs: a long run of one
    non-space character, or a tail that repeats a short unit many times (a loop)."""
    if isinstance(seq, str):
        if not seq.strip():
            return "empty output"
        run = max((len(m.group(0)) for m in re.finditer(r"(\S)\1*", seq)), default=0)
        if run >= t["degenerate_max_char_run"]:
            return f"one character repeated {run} times"
    if not seq:
        return "empty output"
    window = seq[-int(t["degenerate_window"]) :]
    n = len(window)
    best_span, best_p = 0, 0
    for p in range(1, min(int(t["degenerate_max_period"]), n // 2) + 1):
        k = 0
        while k < n - p and window[n - 1 - k] == window[n - 1 - k - p]:
            k += 1
        span = k + p
        if span > best_span and span / p >= t["degenerate_min_repeats"]:
            best_span, best_p = span, p
    need = max(t["degenerate_min_span"], t["degenerate_min_tail_share"] * n)
    if best_p and best_span >= need:
        unit = window[n - best_p :]
        shown = quote(unit, 40) if isinstance(unit, str) else str(list(unit)[:16])
        return f"tail loops a {best_p}-element unit {shown} over {best_span} elements"
    return None


def record_degeneracy(rec: Record, t: Mapping[str, float] = THRESHOLDS) -> str | None:
    """Degeneracy of a record: on its text, and on token ids when the text is fine (a loop of
    tokens that decode to varied whitespace still counts)."""
    why = degeneracy(_output_text(rec), t)
    if why is None and rec.get("token_ids"):
        why = degeneracy(list(rec["token_ids"]), t)
        if why == "empty output":
            why = None
    return why


def degenerate_outputs(
    method: Iterable[Record],
    native: Iterable[Record],
    *,
    max_excess: float = THRESHOLDS["max_degenerate_excess"],
    thresholds: Mapping[str, float] = THRESHOLDS,
) -> GuardResult:
    """Relative guard: fails when the method's outputs degenerate on more prompts than native's
    on the same prompts, by more than ``max_excess`` of the pairs. Identical loops in both are
    not counted; neither are prompts where only native degenerates (they offset)."""
    name = "degenerate_outputs"
    pairs = pair_records(method, native)
    if not pairs:
        return GuardResult(name, None, None, max_excess, "not evaluated: no paired native output")
    method_only: list[tuple[Record, str]] = []
    native_only = both = 0
    for m, n in pairs:
        wm, wn = record_degeneracy(m, thresholds), record_degeneracy(n, thresholds)
        if wm and not wn:
            method_only.append((m, wm))
        elif wn and not wm:
            native_only += 1
        elif wm and wn:
            both += 1
    excess = (len(method_only) - native_only) / len(pairs)
    details = {
        "pairs": len(pairs),
        "method_only": len(method_only),
        "native_only": native_only,
        "both": both,
        "method_only_prompts": [str(m["prompt_id"]) for m, _ in method_only][:20],
    }
    summary = (
        f"degenerate where native is not: {len(method_only)}/{len(pairs)} "
        f"(native-only {native_only}, both {both}); excess {excess:.0%} (max {max_excess:.0%})"
    )
    passed = excess <= max_excess
    if passed or not method_only:
        return GuardResult(name, passed, excess, max_excess, summary, details)
    m, why = method_only[0]
    msg = f"{summary}; e.g. {m['prompt_id']} turn {m.get('turn', 1)}: {why}: " + quote(
        _output_text(m)
    )
    return GuardResult(name, False, excess, max_excess, msg, details)

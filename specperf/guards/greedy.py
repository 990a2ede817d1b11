"""Greedy equivalence: at temperature 0 a lossless method must reproduce native's outputs."""

from __future__ import annotations

from collections.abc import Iterable

from specperf.guards.common import (
    THRESHOLDS,
    GuardResult,
    Record,
    _output_text,
    pair_records,
    quote,
)

# ---- greedy equivalence ------------------------------------------------------------------


def outputs_equal(a: Record, b: Record) -> tuple[bool, str]:
    """Exact match on token ids where both records carry them, else on text (reasoning +
    content). Returns (equal, basis)."""
    ta, tb = a.get("token_ids"), b.get("token_ids")
    if ta is not None and tb is not None:
        return list(ta) == list(tb), "token_ids"
    return _output_text(a) == _output_text(b), "text"


def _first_difference(a: str, b: str) -> int:
    n = min(len(a), len(b))
    return next((i for i in range(n) if a[i] != b[i]), n)


def greedy_equivalence(
    method: Iterable[Record],
    native: Iterable[Record],
    *,
    min_rate: float = THRESHOLDS["min_exact_match_rate"],
) -> GuardResult:
    """Exact-match rate of a method's outputs vs native's (same engine, prompts, temperature 0).
    Only meaningful at temperature 0; the caller decides when to apply it."""
    name = "greedy_equivalence"
    pairs = pair_records(method, native)
    if not pairs:
        return GuardResult(name, None, None, min_rate, "not evaluated: no paired native output")
    matches = 0
    bases: set[str] = set()
    first_bad: tuple[Record, Record] | None = None
    for m, n in pairs:
        eq, basis = outputs_equal(m, n)
        bases.add(basis)
        matches += eq
        if not eq and first_bad is None:
            first_bad = (m, n)
    rate = matches / len(pairs)
    details = {"pairs": len(pairs), "matches": matches, "basis": sorted(bases)}
    summary = f"exact-match {matches}/{len(pairs)} = {rate:.0%} (min {min_rate:.0%})"
    if first_bad is None:
        return GuardResult(name, True, rate, min_rate, summary, details)
    m, n = first_bad
    mt, nt = _output_text(m), _output_text(n)
    at = _first_difference(mt, nt)
    details["first_mismatch"] = {"prompt_id": m["prompt_id"], "turn": m.get("turn", 1), "at": at}
    where = f"first mismatch {m['prompt_id']} turn {m.get('turn', 1)} at char {at}"
    lo = max(0, at - 20)
    msg = (
        f"{summary}; {where}: method {quote(mt[lo:])} vs native {quote(nt[lo:])}"
        if rate < min_rate
        else summary
    )
    return GuardResult(name, rate >= min_rate, rate, min_rate, msg, details)

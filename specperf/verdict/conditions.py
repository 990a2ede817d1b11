"""What an item's run must satisfy before its figures are compared with a baseline: the engine
stayed up and requests did not fail (``run_checks``, needing no baseline), the speeds are long
enough to time (``too_short``), the latencies describe the engine rather than the stream's
delivery (``delivery_bound``), and the baseline was measured on this hardware profile
(``other_profile``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from specperf.verdict.checks import EPS, Check, Status
from specperf.verdict.results import ItemResult, figure


def run_checks(result: ItemResult, max_failed_fraction: float = 0.0) -> list[Check]:
    """Checks that need no baseline: the engine stayed up, requests did not fail."""
    s = result.summary
    key = result.key.as_str()
    out: list[Check] = []
    completed = int(s.get("completed") or 0)
    failed = int(s.get("failed") or 0)
    total = completed + failed
    if s.get("engine_died"):
        out.append(
            Check(
                key,
                "engine",
                "fail",
                reason="the engine died during the item",
                item=result.item_id,
                engine_version=result.engine_version,
            )
        )
    allowed = max_failed_fraction * total
    status: Status = "fail" if failed > allowed + EPS or total == 0 else "pass"
    errors = s.get("errors") or s.get("first_errors") or []
    reason = f"{failed} of {total} requests failed (allowed {max_failed_fraction:.0%})"
    if errors:
        reason += f"; first error: {str(errors[0])[:200]}"
    out.append(
        Check(
            key,
            "failed_requests",
            status,
            measured=float(failed),
            baseline=float(allowed),
            reason=reason if status == "fail" else "",
            item=result.item_id,
            engine_version=result.engine_version,
        )
    )
    return out


LATENCY_PREFIXES = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")
DEFAULT_MIN_DURATION_S = 5.0


def too_short(summary: Mapping[str, Any], min_duration_s: float | None = None) -> str | None:
    """Why the item's speed says nothing (None: long enough). A run of half a second is mostly
    ramp-up and tail: one late wake-up moves it by tens of per cent. The shortest repeat
    counts."""
    if min_duration_s is None:
        wl = summary.get("workload") or {}
        min_duration_s = float(wl.get("min_duration_s", DEFAULT_MIN_DURATION_S))
    if min_duration_s <= 0:
        return None
    # an item summary lists its starts; a start's own summary (all a run cut before the item's
    # end leaves on disk) holds the planned repeat count there instead
    repeats = summary.get("repeats")
    durations = [figure(r, "duration_s") for r in repeats] if isinstance(repeats, list) else []
    durations = [d for d in durations if d is not None] or [figure(summary, "duration_s")]
    shortest = min((d for d in durations if d is not None), default=None)
    if shortest is None or shortest >= min_duration_s:
        return None
    size = summary.get("sizing") or {}
    n = size.get("requests")
    if size.get("source") == "baseline":
        fix = (
            f"its {n} requests are its baseline entry's: remove the entry and run "
            "--update-baselines=missing to size it on this machine"
        )
    elif size.get("source") == "measured":
        fix = f"already sized to {n} requests (the most allowed); raise its requests"
    else:
        fix = "raise its requests (or [workload] min_duration_s)"
    return (
        f"the item lasted {shortest:.2f} s < {min_duration_s:g} s: too short to time on this "
        f"machine; {fix}"
    )


def other_profile(baseline_profile: str | None, profile: str | None) -> bool:
    """True where a baseline value was measured on another hardware profile than the item:
    every metric a machine can move (speed, latency, acceptance, lengths) is compared only
    with its own profile's values. Unknown on either side (older files) is not a mismatch."""
    return bool(baseline_profile and profile and baseline_profile != profile)


def delivery_bound(summary: Mapping[str, Any]) -> str | None:
    """Why the item's latencies describe the delivery of the stream, not the engine (None: they
    describe the engine). Set by the client when chunks arrived in bursts."""
    d = summary.get("delivery")
    if isinstance(d, Mapping) and d.get("bound"):
        return str(d.get("reason") or "chunks arrived in bursts")
    return None

"""The drift check: tonight against the last N nights of the same series (a run of the same
item, fingerprint and hardware), per the suite's metric policies."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from specperf.config import DEFAULT_METRICS, MetricPolicy
from specperf.errors import ConfigError
from specperf.history.store import SCHEMA, Night
from specperf.report.load import (
    hardware_profile,
    key_text,
)

DEFAULT_LAST = 7
DEFAULT_MIN_HISTORY = 3
DEFAULT_PERSIST = 2


# --------------------------------------------------------------------------- the drift check
def metric_value(summary: Mapping[str, Any], name: str) -> float | None:
    """The figure the verdict module would judge (aggregated over repeats where present)."""
    from specperf.verdict import ItemResult

    return ItemResult(dict(summary)).value(name)


def fingerprint_of(summary: Mapping[str, Any]) -> str | None:
    """The comparability fingerprint a summary carries (digest or full object), if any."""
    fp = summary.get("fingerprint_digest")
    if isinstance(fp, str) and fp:
        return fp
    full = summary.get("fingerprint")
    if isinstance(full, dict):
        from specperf.baselines import fingerprint_digest

        return fingerprint_digest(full)
    return None


def series_id(summary: Mapping[str, Any]) -> tuple[str, str]:
    return hardware_profile(dict(summary)), key_text(dict(summary))


def worse_by(value: float, reference: float, direction: str, tol: float) -> tuple[bool, float]:
    """(beyond tolerance, relative change in the bad direction: + = worse), decided by the
    verdict module's ``compare`` so drift and the baseline gate share one rule."""
    from specperf.verdict import compare

    regressed, delta = compare(value, reference, direction, tol)
    if delta is None:
        return regressed, 0.0
    return regressed, -delta if direction == "higher" else delta


@dataclass
class Point:
    night: str
    value: float
    engine_version: str | None = None


@dataclass
class Finding:
    """The drift verdict of one series."""

    hardware_profile: str
    key: str
    metric: str
    direction: str
    tolerance: float
    gate: str
    status: str  # drift | warning | ok | insufficient
    reference: float | None = None
    reference_nights: list[str] = field(default_factory=list)
    recent: list[Point] = field(default_factory=list)
    worse: list[float] = field(default_factory=list)  # per recent point, relative, + = worse
    history_points: int = 0
    tolerance_note: str | None = None  # how a tolerance measured from the history was made

    @property
    def failed(self) -> bool:
        return self.status == "drift"

    def message(self) -> str:
        where = f"{self.key} [{self.hardware_profile}] {self.metric}"
        if self.status == "insufficient":
            return (
                f"{where}: not evaluated — {self.history_points} comparable nights stored, "
                "need more"
            )
        last = ", ".join(f"{p.value:.4g}" for p in self.recent)
        pct = ", ".join(f"{w:+.1%}" for w in self.worse)
        versions = [p.engine_version for p in self.recent if p.engine_version]
        span = f"{self.reference_nights[0][:10]}..{self.recent[-1].night[:10]}"
        text = (
            f"{where}: last {len(self.recent)} nights {last} vs reference {self.reference:.4g} "
            f"(median of {len(self.reference_nights)} nights from {span}); worse by {pct}, "
            f"tolerance {self.tolerance:.0%} ({self.direction} is better)"
        )
        if versions and len(set(versions)) > 1:
            text += f"; engine versions {' → '.join(dict.fromkeys(versions))}"
        elif versions:
            text += f"; engine {versions[-1]}"
        return text

    def to_json(self) -> dict[str, Any]:
        return {
            "hardware_profile": self.hardware_profile,
            "key": self.key,
            "metric": self.metric,
            "direction": self.direction,
            "tolerance": self.tolerance,
            "gate": self.gate,
            "status": self.status,
            "reference": self.reference,
            "reference_nights": self.reference_nights,
            "recent": [vars(p) for p in self.recent],
            "worse": self.worse,
            "history_points": self.history_points,
            "tolerance_note": self.tolerance_note,
            "message": self.message(),
        }


@dataclass
class DriftReport:
    findings: list[Finding]
    nights: list[str]  # the stored nights used (oldest first)
    last: int
    persist: int

    @property
    def drifts(self) -> list[Finding]:
        return [f for f in self.findings if f.status == "drift"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.status == "warning"]

    @property
    def insufficient(self) -> list[Finding]:
        return [f for f in self.findings if f.status == "insufficient"]

    @property
    def failed(self) -> bool:
        return bool(self.drifts)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for f in self.findings:
            out[f.status] = out.get(f.status, 0) + 1
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "failed": self.failed,
            "last": self.last,
            "persist": self.persist,
            "nights": self.nights,
            "counts": self.counts(),
            "findings": [f.to_json() for f in self.findings if f.status != "ok"],
        }

    def to_markdown(self) -> str:
        c = self.counts()
        head = (
            f"### Drift check (last {self.last} nights, {len(self.nights)} stored)\n\n"
            f"{c.get('drift', 0)} drifting, {c.get('warning', 0)} report-only warnings, "
            f"{c.get('ok', 0)} steady, {c.get('insufficient', 0)} not evaluated "
            "(too little history).\n"
        )
        lines = [head]
        for title, rows in (("Drift (fails)", self.drifts), ("Warnings", self.warnings)):
            if rows:
                lines.append(f"\n**{title}**\n")
                lines.extend(f"- {f.message()}" for f in rows)
        return "\n".join(lines) + "\n"


def drift_check(
    current: Sequence[Mapping[str, Any]],
    nights: Sequence[Night],
    *,
    policies: Mapping[str, MetricPolicy] | None = None,
    last: int = DEFAULT_LAST,
    min_history: int = DEFAULT_MIN_HISTORY,
    persist: int = DEFAULT_PERSIST,
    tolerance: float | None = None,
    current_night: str = "tonight",
) -> DriftReport:
    """Judge tonight's summaries against the last ``last`` stored nights (see module doc)."""
    if last < 1 or min_history < 1 or persist < 1:
        raise ConfigError("--last, --min-history and --persist must be at least 1")
    if min_history < persist:
        raise ConfigError(f"--min-history {min_history} must be at least --persist {persist}")
    pols = {
        n: p
        for n, p in (policies or DEFAULT_METRICS).items()
        if p.direction in ("higher", "lower") and (p.tolerance > 0 or tolerance)
    }
    window = list(nights)[-last:]
    # index history: series -> [(night, fingerprint, summary)], oldest first
    past: dict[tuple[str, str], list[tuple[str, str | None, Mapping[str, Any]]]] = {}
    for n in window:
        for s in n.summaries:
            past.setdefault(series_id(s), []).append((n.id, fingerprint_of(s), s))
    findings: list[Finding] = []
    for s in current:
        hw, key = series_id(s)
        fp = fingerprint_of(s)
        rows = [r for r in past.get((hw, key), []) if fp is None or r[1] in (None, fp)]
        for name, pol in pols.items():
            now = metric_value(s, name)
            if now is None:
                continue
            tol = pol.tolerance if tolerance is None else tolerance
            pts = [
                Point(nid, v, ps.get("engine_version"))
                for nid, _, ps in rows
                if (v := metric_value(ps, name)) is not None
            ]
            f = Finding(hw, key, name, pol.direction, tol, pol.gate, "ok", history_points=len(pts))
            findings.append(f)
            if len(pts) < min_history:
                f.status = "insufficient"
                continue
            if pol.gate == "measured":
                # noisy metric (CPU throughput): the history's own spread sets the tolerance,
                # max(suite tolerance, t(0.995,n-1) x sqrt(1+1/n) x CV): a 99 % prediction
                # half-width for one new night
                from specperf.baselines import measured_tolerance

                # spread of the nights before the recent ones: a drift must not widen its own
                # tolerance
                before = pts[: len(pts) - (persist - 1)]
                measured = measured_tolerance([p.value for p in before], tol)
                if measured is not None:
                    tol, f.tolerance_note = measured
                    f.tolerance = tol
            # the older half, never overlapping the recent points
            ref_pts = pts[: min(max(1, len(pts) // 2), len(pts) - (persist - 1))]
            f.reference = statistics.median(p.value for p in ref_pts)
            f.reference_nights = [p.night for p in ref_pts]
            f.recent = [*pts, Point(current_night, now, s.get("engine_version"))][-persist:]
            judged = [worse_by(p.value, f.reference, pol.direction, tol) for p in f.recent]
            f.worse = [round(w, 6) for _, w in judged]
            if all(bad for bad, _ in judged):
                f.status = "drift" if pol.gate in ("always", "measured") else "warning"
    findings.sort(
        key=lambda f: (
            {"drift": 0, "warning": 1, "insufficient": 2}.get(f.status, 3),
            f.key,
            f.metric,
        )
    )
    return DriftReport(findings, [n.id for n in window], last, persist)

"""One evaluated comparison (``Check``) and the comparison arithmetic every gate shares.

Kept apart from the gates so that readers of results (the report, ``specperf merge``) can turn
``verdicts.jsonl`` lines back into checks without pulling in the statistics or the rules.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from specperf.textfmt import number as fmt

Status = Literal["pass", "fail", "xfail", "stale", "missing", "not_evaluated", "info"]
EPS = 1e-9


@dataclass
class Check:
    """One evaluated comparison or rule. ``line()`` is the message a person reads."""

    key: str
    metric: str
    status: Status
    measured: float | None = None
    baseline: float | None = None  # the baseline value, or the bound of a rule
    delta: float | None = None  # relative change measured vs baseline
    tolerance: float | None = None
    direction: str | None = None
    interval: tuple[float, float] | None = None
    interval_method: str | None = None
    engine_version: str | None = None
    baseline_engine_version: str | None = None
    reason: str = ""
    item: str | None = None
    rule: str | None = None
    gated: bool = True
    # a statistical check: the change in the bad direction it flags 9 times in 10 (its power;
    # decision.detectable_change), so a PASS says how large a regression it could have seen
    detectable: float | None = None
    # a statistical check: its test's p (the reason text says it too; scripts read this field)
    p_value: float | None = None
    # a metric the suite gates, compared with a baseline entry (armed or not): the checks
    # "baseline gates armed: N of M" counts (N: those still ``gated``)
    baseline_gate: bool = False
    # a gate that switched itself off in this run (delivery-bound latencies, a guard with
    # nothing to compare, a rule whose scope matches nothing): what kind; ``reason`` says why
    switched_off: str | None = None

    @property
    def failed(self) -> bool:
        return self.status == "fail"

    def line(self) -> str:
        head = f"{self.key}: {self.metric}"
        if self.status in ("missing", "stale", "not_evaluated"):
            return f"{head}: {self.status.replace('_', ' ')}: {self.reason}"
        parts = [head]
        if self.measured is not None:
            m = f"{fmt(self.measured)}"
            if self.baseline is not None:
                word = "bound" if self.rule else "baseline"
                m += f" vs {word} {fmt(self.baseline)}"
            if self.delta is not None:
                m += f" ({self.delta:+.1%}"
                if self.tolerance is not None:
                    sign = {"higher": "-", "lower": "+"}.get(self.direction or "", "±")
                    m += f", tolerance {sign}{self.tolerance:.1%}"
                m += ")"
            parts.append(m)
        if self.interval is not None:
            parts.append(
                f"interval {fmt(self.interval[0])}–{fmt(self.interval[1])}"
                + (f" [{self.interval_method}]" if self.interval_method else "")
            )
        if self.engine_version or self.baseline_engine_version:
            parts.append(
                f"engine {self.engine_version or '?'} "
                f"(baseline {self.baseline_engine_version or '?'})"
                if not self.rule
                else f"engine {self.engine_version or '?'}"
            )
        text = "; ".join(parts)
        if self.reason:
            text += f" — {self.reason}"
        return f"{text} [{self.status.upper()}]"

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["interval"] = list(self.interval) if self.interval else None
        d["message"] = self.line()
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Check:
        names = {f.name for f in dataclasses.fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        if kw.get("interval"):
            kw["interval"] = tuple(kw["interval"])
        return cls(**kw)


TOLERANCE_NOTE = "suite tolerance"  # a row's reason starts so where the file's tolerance differs


def tolerance_differs(c: Check) -> bool:
    """True where the suite's tolerance was used and the baseline file holds another: the
    table shows that reason on every row, a passing one too, so both figures are in view."""
    return c.reason.startswith(TOLERANCE_NOTE)


def join(a: str, b: str) -> str:
    return f"{a}; {b}" if a else b


def compare(measured: float, base: float, direction: str, tol: float) -> tuple[bool, float | None]:
    """(regressed, relative delta). A change of ``tol`` or more in the bad direction is a
    regression; for "equal" in either direction."""
    if base == 0:
        # relative change from 0 is undefined: "higher" from 0 could never fail, so such a
        # baseline is report-only (baselines.cannot_fail); "lower"/"equal" fail on any change
        delta = None if measured == 0 else math.copysign(math.inf, measured)
        if direction == "higher":
            return False, delta
        if direction == "lower":
            return measured > 0, delta
        return measured != 0, delta
    delta = (measured - base) / abs(base)
    if tol == 0:
        bad = {"higher": delta < -EPS, "lower": delta > EPS}.get(direction, abs(delta) > EPS)
        return bad, delta
    if direction == "higher":
        return delta <= -tol + EPS, delta
    if direction == "lower":
        return delta >= tol - EPS, delta
    return abs(delta) >= tol - EPS, delta

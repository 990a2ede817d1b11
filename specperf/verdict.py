"""The ONE place rules are evaluated: measured figures vs baselines, same-run rules (speedup,
cross-engine, floors, guards), the engine-wide check, quarantine, staleness. The plugin,
``specperf verdict``, reports and merges all call these functions; nothing else compares numbers.

How a metric is decided (docs/baselines.md, "How a verdict is reached"):
- Baselines are per hardware profile and keep one value per ENGINE START; a run contributes one
  value per start it measured (``--repeat N --restart-between-repeats``: N starts; repeats
  within one start count as one start, their median).
- With >= 3 baseline starts a gated metric is decided by specperf.stats.decide: a one-sided t
  test on log per-start values against the baseline's start-to-start spread, at the per-check
  alpha of the run's false-alarm budget, AND a change of at least the suite's tolerance (the
  minimum effect) in the bad direction. The line states method, p, alpha and minimum effect.
- Fewer starts: metrics the suite declares deterministic (gate "always": MAL, acceptance,
  output tokens, completed) are compared point-to-point with the tolerance; noisy ones (gate
  "measured": speeds) are NOT EVALUATED with the reason — never a pass.
- Statuses: pass, fail, xfail (quarantined), stale / missing (no comparable baseline),
  not_evaluated (a gated metric that could not be judged: its reason says why) and info
  (report-only by suite policy or by a baseline that could never fail). ``outcome`` folds them:
  a gated not-evaluated never ends as a pass (skip; ``--strict-baselines``: fail).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import json
import math
import statistics
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from specperf import stats
from specperf.baselines import (
    BaselineEntry,
    BaselineFile,
    baseline_path,
    cannot_fail,
    fingerprint_diff,
    load_baselines,
)
from specperf.config import (
    DEFAULT_METRICS,
    LENGTH_METRIC,
    ItemKey,
    KnownIssue,
    MetricPolicy,
    Rule,
    parse_rules,
)
from specperf.engines.base import NATIVE
from specperf.errors import ConfigError

Status = Literal["pass", "fail", "xfail", "stale", "missing", "not_evaluated", "info"]
EPS = 1e-9
BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_LEVEL = 0.95
SUMMARY = "summary.json"
REQUESTS = "requests.jsonl"
SUITE_SNAPSHOT = "suite.json"
VERDICTS = "verdicts.jsonl"
# Metrics that get a per-request bootstrap interval: metric -> how to compute it.
_PER_REQUEST = {
    "output_throughput_tok_s": "ratio",
    "ttft_ms.p50": ("ttft", 50),
    "ttft_ms.p99": ("ttft", 99),
    "tpot_ms.p50": ("tpot", 50),
    "tpot_ms.p99": ("tpot", 99),
}


# --------------------------------------------------------------------------- checks
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

    @property
    def failed(self) -> bool:
        return self.status == "fail"

    def line(self) -> str:
        head = f"{self.key}: {self.metric}"
        if self.status in ("missing", "stale", "not_evaluated"):
            return f"{head}: {self.status.replace('_', ' ')}: {self.reason}"
        parts = [head]
        if self.measured is not None:
            m = f"{_fmt(self.measured)}"
            if self.baseline is not None:
                word = "bound" if self.rule else "baseline"
                m += f" vs {word} {_fmt(self.baseline)}"
            if self.delta is not None:
                m += f" ({self.delta:+.1%}"
                if self.tolerance is not None:
                    sign = {"higher": "-", "lower": "+"}.get(self.direction or "", "±")
                    m += f", tolerance {sign}{self.tolerance:.1%}"
                m += ")"
            parts.append(m)
        if self.interval is not None:
            parts.append(
                f"interval {_fmt(self.interval[0])}–{_fmt(self.interval[1])}"
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


def _fmt(x: float | None) -> str:
    if x is None:
        return "n/a"
    if float(x).is_integer() and abs(x) < 1e6:
        return str(int(x))
    if x == 0 or 0.01 <= abs(x) < 1e5:
        return f"{x:.4g}" if abs(x) < 10 else f"{x:.1f}"
    return f"{x:.3g}"


# --------------------------------------------------------------------------- item results
def figure(summary: Mapping[str, Any], metric: str) -> float | None:
    """A metric from a run summary by dotted path (``ttft_ms.p50``); None when absent."""
    cur: Any = summary
    for part in metric.split("."):
        if not isinstance(cur, Mapping) or part not in cur:
            return None
        cur = cur[part]
    if isinstance(cur, bool) or not isinstance(cur, (int, float)) or math.isnan(cur):
        return None
    return float(cur)


@dataclass
class ItemResult:
    """An item's results as written by the plugin: the enriched summary.json (it carries the
    key, fingerprint, hardware profile and the aggregated ``figures``) and its directory."""

    summary: dict[str, Any]
    path: Path | None = None

    @property
    def key(self) -> ItemKey:
        k = self.summary.get("key")
        if isinstance(k, str):
            return ItemKey.parse(k)
        if isinstance(k, Mapping):
            return ItemKey(
                **{
                    f: k[f]
                    for f in ("model", "engine", "method", "dataset", "concurrency", "sampling")
                }
            )
        raise ConfigError(f"{self.path}: summary has no 'key' (not written by the suite)")

    @property
    def item_id(self) -> str:
        return str(self.summary.get("item_id") or (self.path.name if self.path else "?"))

    @property
    def figures(self) -> dict[str, dict[str, Any]]:
        return dict(self.summary.get("figures") or {})

    def value(self, metric: str) -> float | None:
        fig = self.figures.get(metric)
        if fig is not None:
            v = fig.get("value")
            return None if v is None else float(v)
        return figure(self.summary, metric)

    @property
    def engine_version(self) -> str | None:
        return self.summary.get("engine_version")

    @property
    def hardware_profile(self) -> str | None:
        return self.summary.get("hardware_profile")

    @property
    def fingerprint(self) -> dict[str, Any]:
        return dict(self.summary.get("fingerprint") or {})

    def requests(self) -> list[dict[str, Any]]:
        if self.path is None or not (self.path / REQUESTS).exists():
            return []
        out = []
        for line in (self.path / REQUESTS).read_text(encoding="utf-8").splitlines():
            if line.strip():
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    continue  # a torn last line after a crash
        return out


def load_item(path: Path) -> ItemResult:
    try:
        data = json.loads((path / SUMMARY).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path / SUMMARY}: cannot read: {exc}") from None
    return ItemResult(data, path)


def load_results(dirs: Iterable[Path | str]) -> dict[str, ItemResult]:
    """Results directories → {key string: ItemResult}. The same key in two directories is an
    error unless it is the same file (merge shards first with `specperf merge`)."""
    out: dict[str, ItemResult] = {}
    for d in dirs:
        root = Path(d)
        if not root.is_dir():
            raise ConfigError(f"{root}: results directory does not exist")
        found = sorted(p.parent for p in root.rglob(SUMMARY))
        for item_dir in found:
            res = load_item(item_dir)
            if "key" not in res.summary:
                continue  # a bare `specperf bench` summary: nothing to judge against
            k = res.key.as_str()
            if k in out and out[k].path != item_dir:
                raise ConfigError(f"{item_dir}: key {k} also measured in {out[k].path}")
            out[k] = res
    return out


# --------------------------------------------------------------------------- noise
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


# --------------------------------------------------------------------------- quarantine
def issue_active(
    issue: KnownIssue, engine_version: str | None, today: _dt.date | None = None
) -> tuple[bool, str]:
    """(active, why). Expires on ``until_date`` or once the engine version reaches
    ``until_engine_version``; an unknown engine version keeps a version-bound issue active."""
    today = today or _dt.date.today()
    if issue.until_date:
        try:
            until = _dt.date.fromisoformat(issue.until_date)
        except ValueError:
            return False, f"quarantine has a bad until_date {issue.until_date!r}"
        if today >= until:
            return False, f"quarantine expired on {issue.until_date}"
    if issue.until_engine_version and engine_version:
        from packaging.version import InvalidVersion, Version

        try:
            if Version(engine_version) >= Version(issue.until_engine_version):
                return False, (
                    f"quarantine expired: engine {engine_version} >= {issue.until_engine_version}"
                )
        except InvalidVersion:
            pass
    return True, f"known issue: {issue.reason} ({issue.link})"


def _quarantine(
    check: Check,
    issues: Iterable[KnownIssue],
    key: ItemKey | None,
    today: _dt.date | None,
) -> Check:
    """Turn a failure covered by an active known issue into an expected failure; an expired one
    stays a failure and says so."""
    if check.status != "fail":
        return check
    notes = []
    for issue in issues:
        if key is not None and issue.match and not key.matches(issue.match):
            continue
        if issue.metrics and check.metric not in issue.metrics and check.rule not in issue.metrics:
            continue
        active, why = issue_active(issue, check.engine_version, today)
        if active:
            check.status = "xfail"
            check.reason = _join(check.reason, why)
            return check
        notes.append(why)
    if notes:
        check.reason = _join(check.reason, "; ".join(notes))
    return check


def _join(a: str, b: str) -> str:
    return f"{a}; {b}" if a else b


# --------------------------------------------------------------------------- item verdict
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
    durations = [figure(r, "duration_s") for r in summary.get("repeats") or []]
    durations = [d for d in durations if d is not None] or [figure(summary, "duration_s")]
    shortest = min((d for d in durations if d is not None), default=None)
    if shortest is None or shortest >= min_duration_s:
        return None
    return (
        f"the item lasted {shortest:.2f} s < {min_duration_s:g} s: too short to time on this "
        "machine; raise its requests (or [workload] min_duration_s)"
    )


def delivery_bound(summary: Mapping[str, Any]) -> str | None:
    """Why the item's latencies describe the delivery of the stream, not the engine (None: they
    describe the engine). Set by the client when chunks arrived in bursts."""
    d = summary.get("delivery")
    if isinstance(d, Mapping) and d.get("bound"):
        return str(d.get("reason") or "chunks arrived in bursts")
    return None


def evaluate_item(
    result: ItemResult,
    entry: BaselineEntry | None,
    policies: Mapping[str, MetricPolicy],
    *,
    hardware_profile: str | None = None,
    known_issues: Iterable[KnownIssue] = (),
    max_failed_fraction: float = 0.0,
    today: _dt.date | None = None,
    alpha: float = stats.DEFAULT_RUN_ALPHA,
    missing_reason: str | None = None,
    min_duration_s: float | None = None,
    siblings: Sequence[BaselineEntry] = (),
) -> list[Check]:
    """Every check of one item against its baseline entry (None: missing). ``alpha`` is the
    per-check level of the statistical decisions; ``siblings`` are the baseline entries of the
    same engine config (``config_siblings``), whose starts pool into the start-to-start
    spread; ``missing_reason`` says why no entry exists
    (e.g. no baseline file for this hardware profile); speeds of an item that lasted less than
    ``min_duration_s`` (default: the item's own workload setting, else 5 s) are not judged."""
    key = result.key
    ks = key.as_str()
    profile = hardware_profile or result.hardware_profile
    checks = run_checks(result, max_failed_fraction)
    if entry is None:
        checks.append(
            Check(
                ks,
                "baseline",
                "missing",
                item=result.item_id,
                engine_version=result.engine_version,
                reason=missing_reason or f"no baseline entry for this key (profile {profile})",
            )
        )
        return checks
    diffs = fingerprint_diff(entry.fingerprint, result.fingerprint)
    if diffs:
        shown = "; ".join(diffs[:4]) + (f"; and {len(diffs) - 4} more" if len(diffs) > 4 else "")
        checks.append(
            Check(
                ks,
                "baseline",
                "stale",
                item=result.item_id,
                engine_version=result.engine_version,
                baseline_engine_version=entry.engine_version,
                reason=f"fingerprint differs ({shown}); not compared",
            )
        )
        return checks

    issues = list(known_issues)
    if entry.known_issue:
        issues.insert(0, entry.known_issue)
    figures = result.figures
    length_note: str | None = None
    delivery = delivery_bound(result.summary)
    short = too_short(result.summary, min_duration_s)
    ordered = sorted(policies, key=lambda m: m != LENGTH_METRIC)  # length first
    for metric in ordered:
        pol = policies[metric]
        bm = entry.metrics.get(metric)
        measured = result.value(metric)
        fig = figures.get(metric, {})
        c = Check(
            ks,
            metric,
            "pass",
            measured=measured,
            direction=pol.direction,
            tolerance=pol.tolerance,
            item=result.item_id,
            engine_version=result.engine_version,
            baseline_engine_version=entry.engine_version,
            gated=pol.gate != "never",
        )
        if fig.get("interval"):
            c.interval = (float(fig["interval"][0]), float(fig["interval"][1]))
            c.interval_method = fig.get("interval_method")
        if bm is None:
            if measured is None:
                continue  # neither side has it (e.g. acceptance of a native run)
            c.status = "not_evaluated" if c.gated else "info"
            c.reason = "the baseline entry has no value for this metric"
            checks.append(c)
            continue
        c.baseline = bm.value
        if abs(bm.tolerance - pol.tolerance) > EPS:
            c.reason = (
                f"suite tolerance {pol.tolerance:.1%} used (the baseline file says "
                f"{bm.tolerance:.1%})"
            )
        if measured is None:
            c.status = "fail" if c.gated else "info"
            c.reason = _join(c.reason, "not measured in this run (the baseline has it)")
            checks.append(_quarantine(c, issues, key, today))
            continue
        drifted, c.delta = compare(measured, bm.value, bm.direction, pol.tolerance)
        if metric == LENGTH_METRIC and drifted:  # gated or not, it blocks speed comparisons
            length_note = (
                f"output length drifted {c.delta:+.1%} from the baseline "
                f"(tolerance {pol.tolerance:.0%}); throughput not compared"
            )
        if pol.gate == "never":
            c.status = "info"
            c.reason = _join(c.reason, "report only (suite policy)")
            checks.append(c)
            continue
        never = bm.report_only or cannot_fail(metric, bm.value, bm.direction)
        if never:
            c.status, c.gated = "info", False
            c.reason = _join(c.reason, f"report only: {never}")
            checks.append(c)
            continue
        if bm.hardware_profile and profile and bm.hardware_profile != profile:
            c.status = "not_evaluated"
            c.reason = f"baseline measured on {bm.hardware_profile}, this is {profile}"
            checks.append(c)
            continue
        if delivery and metric.startswith(LATENCY_PREFIXES):
            c.status, c.gated = "not_evaluated", False
            c.reason = f"delivery-bound: {delivery}"
            checks.append(c)
            continue
        if pol.length_dependent and length_note:
            c.status = "not_evaluated"
            c.reason = length_note
            checks.append(c)
            continue
        if pol.hardware_bound and short:
            c.status = "not_evaluated"
            c.reason = short
            checks.append(c)
            continue
        _decide(c, metric, pol, entry, fig, measured, alpha, siblings)
        checks.append(_quarantine(c, issues, key, today))
    return checks


def _decide(
    c: Check,
    metric: str,
    pol: MetricPolicy,
    entry: BaselineEntry,
    fig: Mapping[str, Any],
    measured: float,
    alpha: float,
    siblings: Sequence[BaselineEntry] = (),
) -> None:
    """Set ``c``'s status from the per-start statistics (or a point comparison where the suite
    declares the metric deterministic and the baseline has fewer starts than a spread needs)."""
    base = entry.start_values(metric)
    current = [float(v) for v in (fig.get("starts") or [measured]) if v is not None]
    if len(base) >= stats.MIN_BASELINE_STARTS:
        spread = config_spread(entry, siblings, metric)
        d = stats.decide(
            current, base, pol.direction, min_effect=pol.tolerance, alpha=alpha, spread=spread
        )
        if d.ratio is None or d.regressed is None:
            c.status = "not_evaluated"
            c.reason = _join(c.reason, d.reason)
            return
        geo = math.exp(sum(math.log(v) for v in base) / len(base))
        c.baseline = geo
        if len(current) > 1:  # the figure compared is the geometric mean of this run's starts
            c.measured = math.exp(sum(math.log(v) for v in current if v > 0) / len(current))
        c.delta = d.ratio - 1
        if d.interval:
            c.interval = (d.interval[0] * geo, d.interval[1] * geo)
            c.interval_method = "95 % t interval over starts"
        c.status = "fail" if d.regressed else "pass"
        c.reason = _join(c.reason, d.describe())
        return
    if pol.gate == "always":
        regressed, c.delta = compare(
            measured, entry.metrics[metric].value, pol.direction, pol.tolerance
        )
        c.status = "fail" if regressed else "pass"
        c.reason = _join(
            c.reason,
            f"point comparison with the tolerance: baseline has {len(base)} start(s) and the "
            'suite gates this metric "always"',
        )
        if (
            regressed
            and c.interval
            and _interval_crosses(
                c.interval, entry.metrics[metric].value, pol.direction, pol.tolerance
            )
        ):
            c.reason = _join(c.reason, "borderline: the interval crosses the threshold")
        return
    c.status = "not_evaluated"
    c.reason = _join(
        c.reason,
        f"baseline has {len(base)} engine start(s); >= {stats.MIN_BASELINE_STARTS} are needed "
        "to know its spread (re-make it with --update-baselines --repeat 5)",
    )


ENGINE_WIDE_METRICS = ("output_throughput_tok_s", "mean_acceptance_length")


def config_key(key: ItemKey) -> tuple[str, str, str, str]:
    """The engine config an item runs on: items that differ only in dataset and concurrency
    are measured on the same engine start in a run."""
    return (key.model, key.engine, key.method, key.sampling)


def config_siblings(baselines: BaselineFile, key: ItemKey) -> list[BaselineEntry]:
    """The baseline entries of ``key``'s engine config (itself included)."""
    ck = config_key(key)
    return [e for e in baselines.entries.values() if config_key(e.key) == ck]


# The fingerprint fields that describe the engine start itself (not the workload run on it).
ENGINE_FINGERPRINT_FIELDS = (
    "engine_label",
    "engine_kind",
    "model",
    "tokenizer",
    "topology",
    "server_shape",
    "sampling",
)


def _engine_part(fingerprint: Mapping[str, Any]) -> dict[str, Any]:
    return {k: fingerprint.get(k) for k in ENGINE_FINGERPRINT_FIELDS}


def spread_peers(
    entry: BaselineEntry, siblings: Sequence[BaselineEntry], metric: str
) -> list[BaselineEntry]:
    """The siblings (not ``entry`` itself) whose starts may pool with ``entry``'s: same engine
    fingerprint (``ENGINE_FINGERPRINT_FIELDS``), the metric recorded."""
    mine = _engine_part(entry.fingerprint)
    return [
        e
        for e in siblings
        if e is not entry
        and metric in e.metrics
        and not fingerprint_diff(_engine_part(e.fingerprint), mine)
    ]


def config_spread(
    entry: BaselineEntry, siblings: Sequence[BaselineEntry], metric: str
) -> tuple[float, int] | None:
    """The start-to-start spread of ``metric`` pooled over the entry and its peers of the
    same engine config (stats.pooled_spread), or None when there are no peers to pool: the
    item's own spread is used then."""
    same = spread_peers(entry, siblings, metric)
    if not same:
        return None
    groups = [entry.start_values(metric)] + [e.start_values(metric) for e in same]
    return stats.pooled_spread(groups)


def engine_wide_checks(
    results: Mapping[str, ItemResult],
    baselines: BaselineFile,
    policies: Mapping[str, MetricPolicy],
    *,
    alpha: float = stats.DEFAULT_RUN_ALPHA,
    min_effect: float | None = None,
) -> list[Check]:
    """Per engine (the key's engine name) and metric: the geometric-mean ratio over the
    engine's comparable items (same fingerprint, no failed requests, >= 3 baseline starts),
    tested as one effect (specperf.stats.engine_wide), items of one engine config (which
    share an engine start) counted as one unit. It sees a small uniform slowdown — a new
    release that costs every item 7 % — that no single noisy item can."""
    out: list[Check] = []
    by_engine: dict[str, list[ItemResult]] = {}
    for r in results.values():
        by_engine.setdefault(r.key.engine, []).append(r)
    for engine, items in sorted(by_engine.items()):
        for metric in ENGINE_WIDE_METRICS:
            pol = policies.get(metric)
            if pol is None or pol.gate == "never" or pol.direction not in ("higher", "lower"):
                continue
            groups = []
            units: list[str] = []
            for r in items:
                entry = baselines.get(r.key)
                fig = r.figures.get(metric) or {}
                if (
                    entry is None
                    or metric not in entry.metrics
                    or fingerprint_diff(entry.fingerprint, r.fingerprint)
                    or _usable(r) is not None
                    or fig.get("value") is None
                ):
                    continue
                bm = entry.metrics[metric]
                if bm.report_only or cannot_fail(metric, bm.value, bm.direction):
                    continue
                groups.append((fig.get("starts") or [fig["value"]], entry.start_values(metric)))
                # items of one engine config share its start(s) in a run: one unit
                units.append(r.summary.get("spec_digest") or r.key.method)
            if not groups:
                continue
            effect = pol.tolerance if min_effect is None else min_effect
            d = stats.engine_wide(
                groups, pol.direction, min_effect=effect, alpha=alpha, units=units
            )
            c = Check(
                f"engine {engine}",
                f"engine-wide {metric}",
                "not_evaluated" if d.regressed is None else ("fail" if d.regressed else "pass"),
                measured=None if d.ratio is None else d.ratio,
                baseline=1.0,
                delta=d.delta,
                tolerance=effect,
                direction=pol.direction,
                interval=d.interval,
                interval_method="95 % t interval of the geometric-mean ratio",
                reason=d.describe(),
                rule="engine-wide",
                gated=len(groups) >= 2,
            )
            out.append(c)
    return out


def _interval_crosses(iv: tuple[float, float], base: float, direction: str, tol: float) -> bool:
    if direction == "higher":
        return iv[1] > base * (1 - tol)
    if direction == "lower":
        return iv[0] < base * (1 + tol)
    return iv[0] < base * (1 + tol) and iv[1] > base * (1 - tol)


# --------------------------------------------------------------------------- rules
def _rule_value(res: ItemResult, metric: str, results: Mapping[str, ItemResult]) -> float | None:
    if metric == "speedup":
        native = results.get(res.key.native().as_str())
        if native is None:
            return None
        a, b = res.value("output_throughput_tok_s"), native.value("output_throughput_tok_s")
        return None if a is None or not b else a / b
    return res.value(metric)


def _usable(res: ItemResult | None) -> str | None:
    """Why a result cannot feed a rule (None when it can)."""
    if res is None:
        return "not measured in this run"
    if res.summary.get("engine_died") or int(res.summary.get("failed") or 0) > 0:
        return f"{res.key.as_str()} had failed requests"
    return None


def _bound_check(c: Check, value: float, rule: Rule) -> Check:
    c.measured = value
    lo_bad = rule.min is not None and value < rule.min - EPS
    hi_bad = rule.max is not None and value > rule.max + EPS
    c.baseline = rule.min if rule.min is not None else rule.max
    c.direction = "higher" if rule.min is not None else "lower"
    if rule.min is not None and rule.max is not None:
        c.reason = _join(c.reason, f"allowed {rule.min:g}–{rule.max:g}")
    c.status = "fail" if lo_bad or hi_bad else "pass"
    return c


def evaluate_rules(
    rules: Iterable[Rule],
    results: Mapping[str, ItemResult],
    *,
    subject: ItemKey | None = None,
    kinds: Iterable[str] | None = None,
    known_issues: Iterable[KnownIssue] = (),
    today: _dt.date | None = None,
) -> list[Check]:
    """Same-run rules over ``results``. ``subject`` limits them to the checks whose subject is
    that item (the plugin evaluates an item's own rules right after measuring it); ``kinds``
    limits the rule kinds. A rule whose inputs were not measured is "not_evaluated"."""
    kinds = set(kinds) if kinds is not None else None
    issues = list(known_issues)
    out: list[Check] = []
    for rule in rules:
        if kinds is not None and rule.kind not in kinds:
            continue
        subjects = _rule_subjects(rule, results, subject)
        if not subjects:
            if subject is None:
                out.append(
                    Check(
                        f"rule {rule.id}",
                        f"rule:{rule.id}",
                        "not_evaluated",
                        rule=rule.id,
                        reason="no measured item matches the rule (none selected in this run)",
                        gated=False,
                    )
                )
            continue
        for key in subjects:
            res = results.get(key.as_str())
            c = _evaluate_rule(rule, key, res, results)
            rule_issues = ([rule.known_issue] if rule.known_issue else []) + issues
            out.append(_quarantine(c, rule_issues, key, today))
    return out


def _rule_subjects(
    rule: Rule, results: Mapping[str, ItemResult], subject: ItemKey | None
) -> list[ItemKey]:
    keys = [r.key for r in results.values()]
    if subject is not None:
        keys = [subject]
    out = []
    for k in keys:
        if not k.matches(rule.match):
            continue
        if (
            rule.kind in ("speedup", "guard")
            and k.method == NATIVE
            and rule.guard != "gsm8k_accuracy"
        ):
            continue
        if rule.guard == "mal_collapse" and k.method == NATIVE:
            continue
        out.append(k)
    return out


def _evaluate_rule(
    rule: Rule, key: ItemKey, res: ItemResult | None, results: Mapping[str, ItemResult]
) -> Check:
    ks = key.as_str()
    ev = res.engine_version if res else None
    c = Check(ks, f"rule:{rule.id}", "not_evaluated", rule=rule.id, engine_version=ev)
    why = _usable(res)
    if why:
        c.reason = why
        return c
    assert res is not None
    if rule.kind == "speedup":
        native_key = key.native()
        why = _usable(results.get(native_key.as_str()))
        if why:
            c.reason = f"native ({native_key.as_str()}) {why}"
            return c
        value = _rule_value(res, "speedup", results)
        if value is None:
            c.reason = "throughput missing"
            return c
        c.metric = f"rule:{rule.id} speedup vs native"
        return _bound_check(c, value, rule)
    if rule.kind == "cross_engine":
        ref_key = dataclasses.replace(key, engine=rule.reference_engine or "")
        ref = results.get(ref_key.as_str())
        why = _usable(ref)
        if why:
            c.reason = f"reference {ref_key.as_str()} {why}"
            return c
        assert ref is not None
        mine, theirs = (
            _rule_value(res, rule.metric, results),
            _rule_value(ref, rule.metric, results),
        )
        if mine is None or theirs is None or theirs == 0:
            c.reason = f"{rule.metric} missing for {ks if mine is None else ref_key.as_str()}"
            return c
        c.metric = f"rule:{rule.id} {rule.metric} / {rule.reference_engine}'s"
        c.reason = f"{_fmt(mine)} vs {_fmt(theirs)} ({ref.engine_version or '?'})"
        return _bound_check(c, mine / theirs, rule)
    if rule.kind in ("floor", "ceiling"):
        value = _rule_value(res, rule.metric, results)
        if value is None:
            c.reason = f"{rule.metric} not measured"
            return c
        c.metric = f"rule:{rule.id} {rule.metric}"
        return _bound_check(c, value, rule)
    if rule.kind == "guard":
        return _evaluate_guard(rule, key, res, results, c)
    c.reason = f"unknown rule kind {rule.kind}"
    return c


def _evaluate_guard(
    rule: Rule, key: ItemKey, res: ItemResult, results: Mapping[str, ItemResult], c: Check
) -> Check:
    """Quality guards: specperf.guards computes, this turns a GuardResult into a Check (a guard
    that could not be evaluated is "not_evaluated", never a pass)."""
    from specperf import guards

    c.metric = f"rule:{rule.id} {rule.guard}"
    if rule.guard == "mal_collapse":
        peers = [
            r.summary
            for r in results.values()
            if r.key != key
            and dataclasses.replace(r.key, concurrency=0) == dataclasses.replace(key, concurrency=0)
            and _usable(r) is None
        ]
        kw = {"min_share": rule.min} if rule.min is not None else {}
        return _guard_check(c, guards.mal_collapse(res.summary, peers, res.requests(), **kw))
    native = results.get(key.native().as_str())
    native_recs = native.requests() if native is not None and _usable(native) is None else None
    if rule.guard == "gsm8k_accuracy":
        refs = _dataset_references(res)
        if not refs:
            c.reason = "no GSM8K references for this dataset"
            return c
        kw = {"min_accuracy": rule.min} if rule.min is not None else {}
        return _guard_check(
            c, guards.gsm8k_accuracy(res.requests(), refs, native=native_recs, **kw)
        )
    if native_recs is None:
        c.reason = f"native ({key.native().as_str()}) {_usable(native) or 'has no requests'}"
        return c
    if rule.guard == "greedy_match":
        temp = (res.summary.get("sampling") or {}).get("temperature")
        if temp not in (0, 0.0):
            c.reason = f"greedy match needs temperature 0 (this run: {temp})"
            return c
        kw = {"min_rate": rule.min} if rule.min is not None else {}
        return _guard_check(c, guards.greedy_equivalence(res.requests(), native_recs, **kw))
    if rule.guard == "degenerate":
        kw = {"max_excess": rule.max} if rule.max is not None else {}
        return _guard_check(c, guards.degenerate_outputs(res.requests(), native_recs, **kw))
    c.reason = f"unknown guard {rule.guard}"
    return c


def _guard_check(c: Check, g: Any) -> Check:
    c.measured, c.baseline = g.value, g.threshold
    c.reason = g.message
    c.status = "not_evaluated" if g.passed is None else ("pass" if g.passed else "fail")
    return c


def _dataset_references(res: ItemResult) -> dict[str, str]:
    from specperf import datasets

    try:
        ds = datasets.load_dataset(res.key.dataset, tier=res.summary.get("tier", "full"))
    except Exception:  # no references: the guard is then not evaluated
        return {}
    return {it.id: it.reference for it in ds.items if it.reference}


# --------------------------------------------------------------------------- outcomes
@dataclass
class Outcome:
    """What pytest does with an item: pass, fail, xfail or skip, and the lines to show."""

    status: Literal["pass", "fail", "xfail", "skip"]
    lines: list[str] = field(default_factory=list)


def gated_not_evaluated(checks: Iterable[Check]) -> list[Check]:
    """Gated checks that could not be judged (their reason says why)."""
    return [c for c in checks if c.status == "not_evaluated" and c.gated]


def outcome(
    checks: Sequence[Check],
    *,
    strict: bool = False,
    updated: bool = False,
    update_command: str = "",
) -> Outcome:
    """Fold checks into one outcome. A failure fails. Missing/stale baselines and gated checks
    that could not be evaluated are NOT a pass: the item is skipped with one line each saying
    why (``strict``: it fails), with the command that adopts a baseline. ``updated``: the
    baseline was just rewritten from this run, so only baseline-independent failures (requests,
    engine, same-run rules) still fail."""
    fails = [c for c in checks if c.status == "fail"]
    if updated:
        fails = [c for c in fails if c.metric in ("engine", "failed_requests") or c.rule]
    if fails:
        return Outcome("fail", [c.line() for c in fails])
    nob = [c for c in checks if c.status in ("missing", "stale")] if not updated else []
    unjudged = [c for c in gated_not_evaluated(checks) if not (updated and not c.rule)]
    if nob or unjudged:
        lines = [c.line() for c in nob + unjudged]
        if nob and update_command:
            lines.append(f"adopt a baseline with: {update_command}")
        return Outcome("fail" if strict else "skip", ["NOT EVALUATED: " + lines[0], *lines[1:]])
    xf = [c for c in checks if c.status == "xfail"]
    if xf:
        return Outcome("xfail", [c.line() for c in xf])
    # only report-only checks remain unjudged here: show why they were not judged
    return Outcome("pass", [c.line() for c in checks if c.status == "not_evaluated"])


def summary_counts(checks: Iterable[Check]) -> dict[str, int]:
    """Counts for the summary line: not-evaluated split into gated and report-only."""
    counts: dict[str, int] = {}
    for c in checks:
        name = c.status
        if c.status == "not_evaluated":
            name = "not_evaluated" if c.gated else "not_evaluated_report_only"
        elif c.status == "info":
            name = "report_only"
        counts[name] = counts.get(name, 0) + 1
    return counts


def summary_line(checks: Iterable[Check]) -> str:
    """``12 pass, 1 fail, 3 not evaluated (gated), 20 report only, ...`` in a fixed order."""
    counts = summary_counts(checks)
    order = (
        "fail",
        "pass",
        "xfail",
        "stale",
        "missing",
        "not_evaluated",
        "not_evaluated_report_only",
        "report_only",
    )
    names = {
        "not_evaluated": "not evaluated (gated)",
        "not_evaluated_report_only": "not evaluated (report-only)",
        "report_only": "report only",
    }
    parts = [f"{counts[k]} {names.get(k, k)}" for k in order if counts.get(k)]
    return ", ".join(parts) or "no checks"


# --------------------------------------------------------------------------- whole results
@dataclass
class Verdict:
    checks: list[Check]
    results: dict[str, ItemResult]

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.status == "fail"]

    def to_json(self) -> dict[str, Any]:
        counts: dict[str, int] = {}
        for c in self.checks:
            counts[c.status] = counts.get(c.status, 0) + 1
        return {
            "counts": counts,
            "summary": summary_counts(self.checks),
            "checks": [c.to_json() for c in self.checks],
        }


def read_suite_snapshot(dirs: Iterable[Path | str]) -> dict[str, Any] | None:
    for d in dirs:
        p = Path(d) / SUITE_SNAPSHOT
        if p.is_file():
            try:
                return json.loads(p.read_text(encoding="utf-8"))
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{p}: not valid JSON ({exc.msg})") from None
    return None


def policies_from_snapshot(snap: Mapping[str, Any] | None) -> dict[str, MetricPolicy]:
    if not snap or not snap.get("metrics"):
        return dict(DEFAULT_METRICS)
    return {k: MetricPolicy(**v) for k, v in snap["metrics"].items()}


def known_issues_from_snapshot(snap: Mapping[str, Any] | None) -> list[KnownIssue]:
    out = []
    for ki in (snap or {}).get("known_issues", []):
        d = dict(ki)
        d["match"] = tuple(sorted((d.get("match") or {}).items()))
        d["metrics"] = tuple(d.get("metrics") or ())
        out.append(KnownIssue(**d))
    return out


def rules_from_snapshot(snap: Mapping[str, Any] | None, source: str) -> list[Rule]:
    raw = []
    for r in (snap or {}).get("rules", []):
        d = {k: v for k, v in r.items() if v is not None and k != "match"}
        d.update(r.get("match") or {})
        if d.get("known_issue"):
            ki = dict(d["known_issue"])
            ki.pop("match", None)
            d["known_issue"] = {k: v for k, v in ki.items() if v not in (None, [], ())}
        d["reference_engine"] = r.get("reference_engine")
        raw.append({k: v for k, v in d.items() if v is not None})
    return list(parse_rules(raw, source, engine_names=None))


def evaluate_results(
    dirs: Sequence[Path | str],
    *,
    baselines: BaselineFile | None = None,
    baselines_dir: Path | str | None = None,
    hardware_profile: str | None = None,
    today: _dt.date | None = None,
) -> Verdict:
    """Judge results directories: every item against the baseline file, then every rule of the
    suite (and of the baseline file) over all items together. Policies, rules and quarantines
    come from the ``suite.json`` snapshot the plugin wrote into the results directory."""
    results = load_results(dirs)
    if not results:
        raise ConfigError(f"{', '.join(map(str, dirs))}: no suite item results found")
    snap = read_suite_snapshot(dirs)
    policies = policies_from_snapshot(snap)
    issues = known_issues_from_snapshot(snap)
    rules = rules_from_snapshot(snap, str(Path(dirs[0]) / SUITE_SNAPSHOT))
    max_failed = float(((snap or {}).get("workload") or {}).get("max_failed_fraction", 0.0))
    profile = hardware_profile or next(
        (r.hardware_profile for r in results.values() if r.hardware_profile), None
    )
    missing = None
    if baselines is None:
        folder = (snap or {}).get("baseline_folder")
        if baselines_dir is None or not profile:
            baselines = BaselineFile(Path("<none>"))
            missing = "no baseline file given"
        else:
            path = baseline_path(baselines_dir, profile, folder)
            baselines = load_baselines(path)
            if not path.exists():
                missing = no_baseline_reason(profile, path)
    rules = rules + list(baselines.rules)
    alpha = check_alpha(policies, len(results), len({r.key.engine for r in results.values()}))
    checks: list[Check] = []
    for k in sorted(results):
        checks.extend(
            evaluate_item(
                results[k],
                baselines.get(results[k].key),
                policies,
                hardware_profile=profile,
                known_issues=issues,
                max_failed_fraction=max_failed,
                today=today,
                alpha=alpha.item,
                missing_reason=missing,
                siblings=config_siblings(baselines, results[k].key),
            )
        )
    checks.extend(evaluate_rules(rules, results, known_issues=issues, today=today))
    checks.extend(engine_wide_checks(results, baselines, policies, alpha=alpha.engine_wide))
    return Verdict(checks, results)


def no_baseline_reason(profile: str, path: Path) -> str:
    return f"no baseline for profile {profile} ({path}); adopt with --update-baselines"


def check_alpha(
    policies: Mapping[str, MetricPolicy],
    items: int,
    engines: int,
    run_alpha: float = stats.DEFAULT_RUN_ALPHA,
) -> stats.AlphaSplit:
    """The per-check levels: the run's false-alarm budget split over its gated statistical
    checks (items x gated metrics; the engine-wide checks) by ``stats.split_alpha``."""
    gated = sum(1 for p in policies.values() if p.gate != "never")
    return stats.split_alpha(run_alpha, items * gated, engines * len(ENGINE_WIDE_METRICS))


# --------------------------------------------------------------------------- tables
STATUS_ORDER = {
    "fail": 0,
    "xfail": 1,
    "stale": 2,
    "missing": 3,
    "not_evaluated": 4,
    "info": 5,
    "pass": 6,
}
TABLE_COLUMNS = ("key", "metric", "measured", "baseline", "delta", "verdict")


def table_rows(checks: Iterable[Check], *, include_pass: bool = True) -> list[list[str]]:
    rows = []
    for c in sorted(checks, key=lambda c: (STATUS_ORDER.get(c.status, 9), c.key, c.metric)):
        if not include_pass and c.status == "pass":
            continue
        rows.append(
            [
                c.key,
                c.metric,
                _fmt(c.measured),
                _fmt(c.baseline),
                "" if c.delta is None or math.isinf(c.delta) else f"{c.delta:+.1%}",
                c.status.upper().replace("_", " "),
            ]
        )
    return rows


def format_table(checks: Iterable[Check], *, include_pass: bool = True, width: int = 60) -> str:
    rows = table_rows(checks, include_pass=include_pass)
    if not rows:
        return "(no checks)"
    header = list(TABLE_COLUMNS)
    rows = [[r[0] if len(r[0]) <= width else "…" + r[0][-(width - 1) :], *r[1:]] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(out)


def write_verdicts(path: Path, checks: Iterable[Check]) -> None:
    """Append checks as JSON lines (each line whole; workers append under a lock)."""
    from filelock import FileLock

    from specperf.pool import lock_path

    lines = "".join(json.dumps(c.to_json(), ensure_ascii=False) + "\n" for c in checks)
    with FileLock(str(lock_path(path)), timeout=60), path.open("a", encoding="utf-8") as fh:
        fh.write(lines)


# --------------------------------------------------------------------------- CLI
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", nargs="+", type=Path, help="results directories (one run)")
    parser.add_argument(
        "--baselines-dir",
        type=Path,
        default=Path("baselines"),
        help="directory of per-hardware baseline files (default ./baselines)",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="a baseline file (overrides --baselines-dir and the profile)",
    )
    parser.add_argument(
        "--hardware-profile",
        default=None,
        help="profile whose baseline file to use (default: the results')",
    )
    parser.add_argument("--json", type=Path, default=None, help="write the verdict as JSON")
    parser.add_argument("--all", action="store_true", help="list passing checks too")
    parser.add_argument(
        "--strict-baselines",
        action="store_true",
        help="missing or stale baselines, and gated checks that could not be evaluated, "
        "count as failures",
    )


def run(args: argparse.Namespace) -> int:
    baselines = load_baselines(args.baseline) if args.baseline else None
    if args.baseline and not args.baseline.exists():
        raise ConfigError(f"--baseline {args.baseline}: no such file")
    v = evaluate_results(
        args.results,
        baselines=baselines,
        baselines_dir=args.baselines_dir,
        hardware_profile=args.hardware_profile,
    )
    print(format_table(v.checks, include_pass=args.all))
    print("\n" + summary_line(v.checks))
    for c in v.failed:
        print(f"FAIL {c.line()}", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(v.to_json(), indent=2) + "\n", encoding="utf-8")
    bad = v.failed
    if args.strict_baselines:
        bad = bad + [c for c in v.checks if c.status in ("missing", "stale")]
        bad = bad + gated_not_evaluated(v.checks)
    return 1 if bad else 0


__all__ = [
    "Check",
    "ItemResult",
    "Outcome",
    "Verdict",
    "aggregate",
    "bootstrap_interval",
    "compare",
    "engine_wide_checks",
    "evaluate_item",
    "evaluate_results",
    "evaluate_rules",
    "figure",
    "format_table",
    "issue_active",
    "load_results",
    "outcome",
    "run_checks",
    "summary_line",
    "table_rows",
]

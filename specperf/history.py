"""Nightly history and the drift check: catch several small regressions in a row.

The baseline gate compares one night with one stored figure and a tolerance wide enough for
noise, so a release that costs 3% and the next one another 3% can both pass. The history keeps
every night's run summaries and compares tonight with the last N nights of the same series
(hardware profile + item key + metric, same fingerprint where the summary carries one).

Drift rule (per series, direction and tolerance from the suite's metric policies):
  reference = median of the older half of the last N stored nights;
  flagged when the last ``persist`` points (the latest stored nights and tonight, default 2) are
  ALL worse than the reference by the tolerance or more. One bad night alone is the baseline
  gate's business; a new, lower level that persists — however it was reached — is drift.
  Fewer than ``min_history`` stored points: "insufficient history", never a pass.
"Worse by the tolerance or more" is the verdict module's ``compare``, the same test as the
baseline gate. Metrics whose policy gates ("always"/"measured") fail the check; report-only
metrics (gate "never", e.g. TTFT/TPOT) are listed as warnings. For "measured" metrics (noisy
CPU throughput) the tolerance is max(suite tolerance, t(0.995, n-1) x sqrt(1 + 1/n) x CV) over
the n nights before the recent ones — the half-width of a 99 % prediction interval for one new
night (``baselines.measured_tolerance``).

Store layout (a plain directory; in CI a worktree of the results branch, see docs/nightly.md):
``<store>/nights/<YYYY-MM-DDTHHMMSSZ>[-<run id>]/night.json`` (date, run id, commit, engine
versions, verdict counts) and ``summaries.jsonl`` (one run summary per line; requests are not
kept). Nights are written atomically; ``--keep`` prunes the oldest.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import re
import shutil
import statistics
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from specperf.config import DEFAULT_METRICS, MetricPolicy
from specperf.dotted import get_path
from specperf.errors import ConfigError
from specperf.report.load import (
    find_items,
    hardware_profile,
    key_text,
    read_json,
    read_jsonl,
)
from specperf.results import write_json_atomic
from specperf.summary_schema import check_summary

SCHEMA = 1
NIGHTS = "nights"
NIGHT_FILE = "night.json"
SUMMARIES_FILE = "summaries.jsonl"
DEFAULT_LAST = 7
DEFAULT_MIN_HISTORY = 3
DEFAULT_PERSIST = 2
_ID_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{6}Z(-[A-Za-z0-9_.-]+)?$")


# --------------------------------------------------------------------------- the store
@dataclass
class Night:
    """One stored nightly run."""

    id: str
    path: Path
    meta: dict[str, Any]

    @property
    def date(self) -> str:
        return str(self.meta.get("date") or self.id)

    @cached_property
    def summaries(self) -> list[dict[str, Any]]:
        return read_jsonl(self.path / SUMMARIES_FILE)


def night_id(date: _dt.datetime, run_id: str | None = None) -> str:
    """Sortable, file-safe id: ``2026-11-29T021700Z-<run id>``."""
    stamp = date.astimezone(_dt.timezone.utc).strftime("%Y-%m-%dT%H%M%SZ")
    if run_id:
        safe = re.sub(r"[^A-Za-z0-9_.-]", "-", str(run_id))
        return f"{stamp}-{safe}"
    return stamp


def read_summaries(results_dirs: Sequence[Path | str]) -> list[dict[str, Any]]:
    """Every item summary of the given results directories (shards read as one set)."""
    out: list[dict[str, Any]] = []
    if not results_dirs:
        raise ConfigError("no results directory given")
    for d in map(Path, results_dirs):
        if not d.is_dir():
            raise ConfigError(f"{d}: results directory does not exist")
        items = find_items(d)
        if not items:
            raise ConfigError(f"{d}: no item results (no */summary.json) found")
        for item in items:
            s = read_json(item / "summary.json")
            if not isinstance(s, dict):
                raise ConfigError(f"{item / 'summary.json'}: expected a JSON object")
            check_summary(s, str(item / "summary.json"))
            s.setdefault("item", item.name)
            out.append(s)
    return out


def _verdict_counts(results_dirs: Sequence[Path]) -> dict[str, int]:
    """Check counts by status from the verdict the suite or `specperf merge` wrote
    (``verdict.json`` counts, else the ``verdicts.jsonl`` lines); informational."""
    from specperf import verdict

    counts: dict[str, int] = {}
    for d in results_dirs:
        whole = d / "verdict.json"
        data = read_json(whole) if whole.is_file() else None
        if isinstance(data, dict) and isinstance(data.get("counts"), dict):
            rows = [{"status": k} for k, n in data["counts"].items() for _ in range(int(n))]
        elif (d / verdict.VERDICTS).is_file():
            rows = read_jsonl(d / verdict.VERDICTS)
        else:
            continue
        for row in rows:
            status = row.get("status") if isinstance(row, dict) else None
            if isinstance(status, str):
                counts[status] = counts.get(status, 0) + 1
    return counts


def add_night(
    store: Path | str,
    results_dirs: Sequence[Path | str],
    *,
    date: _dt.datetime | None = None,
    run_id: str | None = None,
    commit: str | None = None,
    meta: Mapping[str, Any] | None = None,
    keep: int | None = None,
) -> Night:
    """Store tonight's summaries as one night; prune to the newest ``keep`` nights."""
    dirs = [Path(d) for d in results_dirs]
    summaries = read_summaries(dirs)
    date = date or _dt.datetime.now(_dt.timezone.utc)
    nid = night_id(date, run_id)
    path = Path(store) / NIGHTS / nid
    if path.exists():
        raise ConfigError(f"{path}: night {nid} is already stored")
    versions = sorted(
        {f"{s.get('engine')}=={s.get('engine_version')}" for s in summaries if s.get("engine")}
    )
    info: dict[str, Any] = {
        "schema": SCHEMA,
        "id": nid,
        "date": date.astimezone(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "run_id": run_id,
        "commit": commit,
        "items": len(summaries),
        "engine_versions": versions,
        "hardware_profiles": sorted({hardware_profile(s) for s in summaries}),
        "suites": sorted(
            {
                str(s["environment"]["suite"])
                for s in summaries
                if get_path(s, "environment", "suite")
            }
        ),
        "verdicts": _verdict_counts(dirs),
        **dict(meta or {}),
    }
    tmp = path.with_name(f".{nid}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    text = "".join(json.dumps(s, ensure_ascii=False, sort_keys=True) + "\n" for s in summaries)
    (tmp / SUMMARIES_FILE).write_text(text, encoding="utf-8")
    write_json_atomic(tmp / NIGHT_FILE, info)
    os.replace(tmp, path)
    if keep is not None:
        prune(store, keep)
    return Night(nid, path, info)


def load_nights(store: Path | str) -> list[Night]:
    """Stored nights, oldest first. A missing store is an empty history."""
    root = Path(store) / NIGHTS
    if not root.is_dir():
        return []
    out = []
    for p in sorted(root.iterdir()):
        if not p.is_dir() or not _ID_RE.match(p.name):
            continue
        meta = read_json(p / NIGHT_FILE) if (p / NIGHT_FILE).exists() else {}
        if not isinstance(meta, dict):
            raise ConfigError(f"{p / NIGHT_FILE}: expected a JSON object")
        out.append(Night(p.name, p, meta))
    return sorted(out, key=lambda n: (n.date, n.id))


def prune(store: Path | str, keep: int) -> list[str]:
    """Delete all but the newest ``keep`` nights; returns the removed ids."""
    if keep < 1:
        raise ConfigError(f"--keep {keep}: keep at least one night")
    nights = load_nights(store)
    gone = nights[: max(0, len(nights) - keep)]
    for n in gone:
        shutil.rmtree(n.path)
    return [n.id for n in gone]


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


# --------------------------------------------------------------------------- CLI
def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="history_cmd", required=True)
    a = sub.add_parser("add", help="store tonight's results as one night")
    a.add_argument("results", nargs="+", type=Path, help="results directories (shards)")
    a.add_argument("--store", type=Path, required=True, help="history directory")
    a.add_argument("--run-id", help="CI run id (part of the night id)")
    a.add_argument("--commit", help="suite repository commit")
    a.add_argument("--date", help="ISO date-time of the night (default: now, UTC)")
    a.add_argument("--keep", type=int, help="keep only the newest N nights")

    c = sub.add_parser("check", help="drift of tonight's results against the last N nights")
    c.add_argument("results", nargs="+", type=Path, help="tonight's results directories")
    c.add_argument("--store", type=Path, required=True, help="history directory")
    c.add_argument("--last", type=int, default=DEFAULT_LAST, help="nights compared (default 7)")
    c.add_argument(
        "--min-history",
        type=int,
        default=DEFAULT_MIN_HISTORY,
        help="stored points needed to judge a series (default 3)",
    )
    c.add_argument(
        "--persist",
        type=int,
        default=DEFAULT_PERSIST,
        help="latest points (tonight included) that must all be worse (default 2)",
    )
    c.add_argument(
        "--tolerance",
        type=float,
        help="one relative tolerance for every metric (default: the suite's)",
    )
    c.add_argument("--suite", help="suite whose metric policies apply (default: built-in)")
    c.add_argument("--json", type=Path, dest="json_out", help="write the findings as JSON")
    c.add_argument("--markdown", type=Path, help="write the findings as markdown")

    ls = sub.add_parser("list", help="list stored nights")
    ls.add_argument("--store", type=Path, required=True, help="history directory")


def _parse_date(text: str | None) -> _dt.datetime | None:
    if not text:
        return None
    try:
        d = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"--date {text!r}: expected an ISO date-time") from None
    return d if d.tzinfo else d.replace(tzinfo=_dt.timezone.utc)


def _policies(suite: str | None, results: Sequence[Path]) -> Mapping[str, MetricPolicy]:
    """The suite's metric policies: from --suite, else the snapshot the plugin wrote."""
    from specperf import verdict

    if suite:
        from specperf.config import load_suite

        return load_suite(suite).metrics
    return verdict.policies_from_snapshot(verdict.read_suite_snapshot(results))


def run(args: argparse.Namespace) -> int:
    if args.history_cmd == "add":
        night = add_night(
            args.store,
            args.results,
            date=_parse_date(args.date),
            run_id=args.run_id,
            commit=args.commit,
            keep=args.keep,
        )
        print(f"stored night {night.id} ({night.meta['items']} items) in {night.path}")
        return 0
    if args.history_cmd == "list":
        for n in load_nights(args.store):
            versions = " ".join(n.meta.get("engine_versions", []))
            print(f"{n.id}  items={n.meta.get('items')}  {versions}")
        return 0
    report = drift_check(
        read_summaries(args.results),
        load_nights(args.store),
        policies=_policies(args.suite, args.results),
        last=args.last,
        min_history=args.min_history,
        persist=args.persist,
        tolerance=args.tolerance,
    )
    md = report.to_markdown()
    print(md, end="")
    if args.json_out:
        write_json_atomic(args.json_out, report.to_json())
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(md, encoding="utf-8")
    step = os.environ.get("GITHUB_STEP_SUMMARY")
    if step:
        with open(step, "a", encoding="utf-8") as fh:
            fh.write(md)
    if report.failed:
        print(f"specperf history: {len(report.drifts)} series drifted", file=sys.stderr)
        return 1
    return 0


__all__ = [
    "DriftReport",
    "Finding",
    "Night",
    "add_night",
    "drift_check",
    "load_nights",
    "metric_value",
    "night_id",
    "prune",
    "read_summaries",
    "worse_by",
]

"""Per-hardware baseline files: keys, fingerprints, per-start values, and update with merge.

One JSON file per hardware profile (``baselines/<profile>.json``; a suite may name a folder of
its own, ``baselines/<folder>/<profile>.json``). Every metric a machine can move — speed, latency,
acceptance, output length — is therefore compared only with figures of the same profile, and
profiles never overwrite each other. Entries are keyed
``model/engine/method/dataset/c<N>/sampling``; each metric is ``{"value", "direction",
"tolerance", "starts": [{"value", "host", "date", "engine_version", "boot_id", "cpu"}, ...]}``
— one value per ENGINE START, the unit the verdict statistics use (specperf.stats) — and each
entry carries provenance and the fingerprint of everything that makes two runs comparable. An
update of the same fingerprint and engine version appends its starts (those of the last
``KEEP_PASSES`` passes, at most ``KEEP_STARTS``, are kept); anything else replaces the entry.
Updates take a file lock, re-read the file, merge and replace it atomically, so N xdist
workers writing at once lose nothing and a reader never sees a half-written file. The format
is documented in docs/baselines.md.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import json
import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from filelock import FileLock

from specperf.baseline_schema import SCHEMA, SOURCES, TOLERANCE_SOURCES, BaselineFileSchema
from specperf.config import ItemKey, KnownIssue, MetricPolicy, Rule
from specperf.dotted import flatten
from specperf.errors import ConfigError
from specperf.fileio import runtime_dir
from specperf.fileio import write_text_atomic as write_atomic
from specperf.validation import validate

# Used by the nightly drift check (specperf.history): max(suite tolerance, t(0.995, n-1) ×
# sqrt(1 + 1/n) × CV), the half-width of a two-sided 99 % prediction interval for ONE new night.
MIN_REPEATS_FOR_TOLERANCE = 3
_T995 = {
    2: 9.925,
    3: 5.841,
    4: 4.604,
    5: 4.032,
    6: 3.707,
    7: 3.499,
    8: 3.355,
    9: 3.250,
    10: 3.169,
    12: 3.055,
    15: 2.947,
    20: 2.845,
    30: 2.750,
}


def t995(df: int) -> float:
    """Student's t 0.995 quantile (a small table; conservative between entries)."""
    if df >= 60:
        return 2.660
    return _T995[max(k for k in _T995 if k <= df)] if df >= 2 else float("inf")


# start field <- provenance field: the machine a start ran on
_START_MACHINE = {"boot_id": "boot_id", "cpu": "cpu_signature"}

# Starts count as independent draws of the host's state (separate passes on one machine,
# separate days for a speed gate) only when at least this many hours apart: starts made within
# one afternoon share its load, clocks and thermal state whatever the calendar says, so neither
# the UTC date nor the number of updates tells them apart.
INDEPENDENT_AFTER_H = 12.0


def start_time(start: Mapping[str, Any]) -> _dt.datetime | None:
    """When a stored start was measured (its ``date``, UTC: the leading ISO time; text after
    it is a label), or None when not recorded."""
    raw = str(start.get("date") or "").split(" ", 1)[0]
    if not raw:
        return None
    try:
        t = _dt.datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=_dt.timezone.utc)


def _windows(times: list[_dt.datetime]) -> list[_dt.datetime]:
    """Per time (in the given order), the start of its window: times sorted, a window opens at
    its first time and holds every time less than INDEPENDENT_AFTER_H later."""
    opened: dict[_dt.datetime, _dt.datetime] = {}
    begin: _dt.datetime | None = None
    gap = _dt.timedelta(hours=INDEPENDENT_AFTER_H)
    for t in sorted(set(times)):
        if begin is None or t - begin >= gap:
            begin = t
        opened[t] = begin
    return [opened[t] for t in times]


def pass_labels(starts: list[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    """The pass each stored start belongs to: its machine (host and boot id: a fresh VM or a
    reboot is a new host state) and its window on that machine (starts less than
    INDEPENDENT_AFTER_H after the window's first start are one pass, however many updates
    wrote them). Starts without a recorded time are one pass per machine."""
    by_machine: dict[tuple[Any, Any], list[int]] = {}
    for i, st in enumerate(starts):
        by_machine.setdefault((st.get("host"), st.get("boot_id")), []).append(i)
    labels: list[tuple[Any, ...]] = [()] * len(starts)
    for machine, idx in by_machine.items():
        timed = [i for i in idx if start_time(starts[i]) is not None]
        begins = _windows([start_time(starts[i]) for i in timed])  # type: ignore[misc]
        for i, b in zip(timed, begins, strict=True):
            labels[i] = (*machine, b.strftime("%Y-%m-%dT%H:%M:%SZ"))
        for i in idx:
            if i not in timed:
                labels[i] = (*machine, None)
    return labels


def pass_label(start: Mapping[str, Any]) -> tuple[Any, ...]:
    """The pass of one start taken alone (``pass_labels`` of a list of one)."""
    return pass_labels([start])[0]


def independent_windows(starts: list[Mapping[str, Any]]) -> list[str] | None:
    """The windows (their first start's date and time) the starts fall into, on any machine:
    starts less than INDEPENDENT_AFTER_H apart share one. None when a start has no time."""
    times = [start_time(st) for st in starts]
    if not times or any(t is None for t in times):
        return None
    begins = sorted(set(_windows(times)))  # type: ignore[arg-type]
    return [b.strftime("%Y-%m-%dT%H:%MZ") for b in begins]


@dataclass
class BaselineMetric:
    value: float
    direction: str
    tolerance: float
    tolerance_source: str = "suite"  # suite | measured | seed-note
    tolerance_note: str | None = None  # how a measured tolerance was obtained
    hardware_profile: str | None = None  # where the value (and tolerance) was measured
    samples: list[float] | None = None  # old files: per repeat (see start_values)
    interval: list[float] | None = None
    note: str | None = None
    # one value per engine start: {"value", "host", "date", "engine_version"}
    starts: list[dict[str, Any]] | None = None
    # why this metric can never gate (e.g. MAL 1.0 of a head that accepts nothing)
    report_only: str | None = None

    def start_values(self, engine_starts: int | None = None) -> list[float]:
        """The per-start values the statistics use. Files older than per-start storage kept
        ``samples`` per repeat: they count as starts only when the provenance says each repeat
        had its own engine start (``engine_starts``); else the value is one start."""
        if self.starts:
            return [float(s["value"]) for s in self.starts if s.get("value") is not None]
        if self.samples and engine_starts and engine_starts == len(self.samples):
            return [float(v) for v in self.samples if v is not None]
        return [self.value]

    def start_passes(self, engine_starts: int | None = None) -> list[tuple[Any, ...]]:
        """The pass (run) each of ``start_values``' values was measured in (``pass_label``).
        Values without per-start records are one pass, so the statistics treat them start by
        start (stats.MIN_BASELINE_PASSES)."""
        if self.starts:
            return pass_labels([s for s in self.starts if s.get("value") is not None])
        return [("unrecorded",)] * len(self.start_values(engine_starts))

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


@dataclass
class BaselineEntry:
    key: ItemKey
    metrics: dict[str, BaselineMetric]
    provenance: dict[str, Any]
    fingerprint: dict[str, Any]
    known_issue: KnownIssue | None = None

    @property
    def fingerprint_digest(self) -> str:
        return fingerprint_digest(self.fingerprint)

    @property
    def engine_version(self) -> str | None:
        return self.provenance.get("engine_version")

    @property
    def engine_starts(self) -> int | None:
        size = self.provenance.get("sample_size") or {}
        n = size.get("engine_starts") if isinstance(size, dict) else None
        return int(n) if isinstance(n, int) else None

    def start_values(self, metric: str) -> list[float]:
        m = self.metrics.get(metric)
        return [] if m is None else m.start_values(self.engine_starts)

    def start_passes(self, metric: str) -> list[tuple[Any, ...]]:
        m = self.metrics.get(metric)
        return [] if m is None else m.start_passes(self.engine_starts)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "key": self.key.to_json(),
            "metrics": {k: m.to_json() for k, m in sorted(self.metrics.items())},
            "provenance": self.provenance,
            "fingerprint": self.fingerprint,
            "fingerprint_digest": self.fingerprint_digest,
        }
        if self.known_issue:
            ki = self.known_issue.to_json()
            ki.pop("match", None)
            out["known_issue"] = {k: v for k, v in ki.items() if v not in (None, [], ())}
        return out


@dataclass
class BaselineFile:
    path: Path
    hardware_profile: str | None = None
    description: str = ""
    entries: dict[str, BaselineEntry] = field(default_factory=dict)
    rules: list[Rule] = field(default_factory=list)
    raw_rules: list[dict[str, Any]] = field(default_factory=list)

    def get(self, key: ItemKey) -> BaselineEntry | None:
        return self.entries.get(key.as_str())

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"schema": SCHEMA}
        if self.hardware_profile:
            out["hardware_profile"] = self.hardware_profile
        if self.description:
            out["description"] = self.description
        if self.raw_rules:
            out["rules"] = self.raw_rules
        out["entries"] = {k: self.entries[k].to_json() for k in sorted(self.entries)}
        return out


# --------------------------------------------------------------------------- fingerprints
def fingerprint_digest(fp: Mapping[str, Any]) -> str:
    blob = json.dumps(fp, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def fingerprint_diff(stored: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """Human-readable differences ``field: baseline → now`` (empty when comparable)."""
    a, b = flatten(dict(stored)), flatten(dict(current))
    diffs = []
    for k in sorted(set(a) | set(b)):
        if a.get(k) != b.get(k):
            diffs.append(f"{k}: {a.get(k, '<absent>')!r} → {b.get(k, '<absent>')!r}")
    return diffs


# --------------------------------------------------------------------------- file names
def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in name)


def baseline_path(baselines_dir: Path | str, profile: str, folder: str | None = None) -> Path:
    """``<dir>/<profile>.json`` (or ``<dir>/<folder>/<profile>.json`` for a suite that keeps
    its baselines apart); names are file-safe slugs. One file per profile: a second machine's
    ``--update-baselines`` can never overwrite the first's figures."""
    base = Path(baselines_dir) / _safe(folder) if folder else Path(baselines_dir)
    return base / f"{_safe(profile)}.json"


# --------------------------------------------------------------------------- reading
def load_baselines(path: Path | str) -> BaselineFile:
    """Read a baseline file; a missing file is an empty one. Bad content → one-line
    ConfigError naming the file and the key."""
    path = Path(path)
    if not path.exists():
        return BaselineFile(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    return parse_baselines(data, path)


def parse_baselines(data: Any, path: Path) -> BaselineFile:
    """A baseline file's parsed JSON → BaselineFile, validated by ``BaselineFileSchema``."""
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: <top>: expected a JSON object")
    f = validate(BaselineFileSchema, data, str(path), table="an object")
    out = BaselineFile(path, hardware_profile=f.hardware_profile, description=f.description)
    for key_str, e in f.entries.items():
        assert e.metrics is not None and e.provenance is not None and e.fingerprint is not None
        out.entries[key_str] = BaselineEntry(
            ItemKey.parse(key_str),
            {name: BaselineMetric(**m.model_dump()) for name, m in e.metrics.items()},
            e.provenance,
            e.fingerprint,
            e.known_issue.issue() if e.known_issue is not None else None,
        )
    if f.rules:
        from specperf.config import parse_rules

        out.rules = list(parse_rules(f.rules, str(path), engine_names=None))
        out.raw_rules = f.rules
    return out


# --------------------------------------------------------------------------- building entries
def measured_tolerance(samples: list[float], floor: float) -> tuple[float, str] | None:
    """Tolerance from the spread of repeats: max(floor, t(0.995, n-1)·sqrt(1+1/n)·CV), the
    99 % prediction half-width for one new run. None below MIN_REPEATS_FOR_TOLERANCE repeats
    (one run says nothing about noise)."""
    vals = [s for s in samples if s is not None]
    n = len(vals)
    if n < MIN_REPEATS_FOR_TOLERANCE:
        return None
    mean = statistics.fmean(vals)
    if mean == 0:
        return None
    cv = statistics.stdev(vals) / abs(mean)
    k = t995(n - 1) * math.sqrt(1 + 1 / n)
    tol = max(floor, k * cv)
    note = (
        f"max(suite {floor:.3g}, t(0.995,{n - 1})*sqrt(1+1/{n}) = {k:.2f} x CV) with "
        f"CV={cv:.4f} over {n} repeats (min {min(vals):.4g}, max {max(vals):.4g})"
    )
    return round(tol, 4), note


# Per metric, older starts fall off as updates append new ones. The statistics' unit is the pass
# (the run that measured them, stats.MIN_BASELINE_PASSES), so what is kept is counted in passes:
# a nightly of 3 starts per item keeps 10 nights, not 3.
KEEP_PASSES = 10
KEEP_STARTS = 40


def _keep_recent(
    starts: list[dict[str, Any]], keep_passes: int, keep_starts: int
) -> list[dict[str, Any]]:
    """The starts of the last ``keep_passes`` passes (``pass_labels``), at most ``keep_starts``
    of them, in their order."""
    labels = pass_labels(starts)
    recent = set(list(dict.fromkeys(labels))[-keep_passes:])
    return [st for st, lab in zip(starts, labels, strict=True) if lab in recent][-keep_starts:]


MAL_METRIC = "mean_acceptance_length"


MAL_FLOOR = 1.0  # a verify step always emits one token: MAL never falls below 1


def cannot_fail(metric: str, value: float, direction: str, tolerance: float = 0.0) -> str | None:
    """Why a stored value would make a gate that can never fail (None: it can fail). MAL
    cannot fall below 1.0, so a baseline within ``tolerance`` of 1.0 (a random head's 1.00-1.03
    against a 2 % tolerance) could never drop far enough to fail, not only one of exactly 1.0."""
    if direction == "higher" and value <= 0:
        return f"baseline {value:g} with direction higher: no measured value can fall below it"
    if metric == MAL_METRIC and direction == "higher":
        if value <= MAL_FLOOR + 1e-9:
            return (
                f"MAL {value:g}: the draft accepts nothing (a random head?), so 'accepts fewer "
                "tokens' can never be seen; use a draft that accepts tokens"
            )
        if value * (1 - tolerance) <= MAL_FLOOR + 1e-9:
            return (
                f"MAL {value:g} with tolerance {tolerance:.1%}: failing needs a MAL of "
                f"{value * (1 - tolerance):.4f} or less, and MAL never falls below "
                f"{MAL_FLOOR:g}; the draft accepts almost nothing (a random head?): use a draft "
                "that accepts tokens"
            )
    return None


def make_entry(
    key: ItemKey,
    figures: Mapping[str, Mapping[str, Any]],
    policies: Mapping[str, MetricPolicy],
    *,
    fingerprint: Mapping[str, Any],
    provenance: Mapping[str, Any],
    hardware_profile: str,
    previous: BaselineEntry | None = None,
    keep_starts: int = KEEP_STARTS,
    keep_passes: int = KEEP_PASSES,
) -> BaselineEntry:
    """A baseline entry from an item's figures ({metric: {value, starts, interval}}).

    Each metric keeps one value per engine start. When ``previous`` has the same fingerprint
    and engine version, its starts are kept and this run's appended (those of the last
    ``keep_passes`` passes stay, at most ``keep_starts``); otherwise the entry starts afresh.
    The stored value is the median of the kept starts. A value that would make a gate unable
    to fail is stored ``report_only`` with the reason. A quarantine on the previous entry is
    kept."""
    prov = dict(provenance)
    prov.setdefault("source", "measured")
    prov.setdefault("date", _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
    prov.setdefault("hardware_profile", hardware_profile)
    same = (
        previous is not None
        and previous.fingerprint_digest == fingerprint_digest(fingerprint)
        and previous.engine_version == prov.get("engine_version")
        and previous.provenance.get("source") == "measured"
    )
    stamp = {
        "host": prov.get("host"),
        "date": prov["date"],
        "engine_version": prov.get("engine_version"),
    }
    # which machine and CPU each start ran on, where the run knows (pass_labels, and the speed
    # verdict's other-CPU rule); older files' starts lack them
    stamp.update({k: prov[f] for k, f in _START_MACHINE.items() if prov.get(f)})
    metrics: dict[str, BaselineMetric] = {}
    for name, fig in figures.items():
        value = fig.get("value")
        if value is None or name not in policies:
            continue
        pol = policies[name]
        new_starts = [
            {"value": float(v), **stamp} for v in (fig.get("starts") or [value]) if v is not None
        ]
        kept: list[dict[str, Any]] = []
        if same and previous is not None and name in previous.metrics:
            old = previous.metrics[name]
            kept = list(old.starts or []) or [
                {"value": v, "host": None, "date": previous.provenance.get("date")}
                for v in old.start_values(previous.engine_starts)
            ]
        starts = _keep_recent(kept + new_starts, keep_passes, keep_starts)
        median = statistics.median(float(s["value"]) for s in starts)
        metrics[name] = BaselineMetric(
            value=float(median),
            direction=pol.direction,
            tolerance=pol.tolerance,
            hardware_profile=hardware_profile,
            starts=starts,
            # the run's own interval describes the value only when the entry is this run's
            # alone: after an append the median of all kept starts may lie outside it
            interval=list(fig["interval"]) if fig.get("interval") and not kept else None,
            report_only=cannot_fail(name, float(median), pol.direction, pol.tolerance),
        )
    if same and previous is not None:
        size = dict(prov.get("sample_size") or {})
        size["engine_starts_kept"] = max((len(m.starts or []) for m in metrics.values()), default=0)
        prov["sample_size"] = size
        prov["appended_to"] = previous.provenance.get("date")
    return BaselineEntry(
        key=key,
        metrics=metrics,
        provenance=prov,
        fingerprint=dict(fingerprint),
        known_issue=previous.known_issue if previous else None,
    )


# --------------------------------------------------------------------------- writing
# write_atomic (specperf.fileio.write_text_atomic) stays importable from here.
def lock_for(path: Path) -> FileLock:
    """A lock beside nothing the user commits: under the runtime dir, keyed by the file's
    absolute path (every xdist worker of a run is on this host)."""
    digest = hashlib.sha256(str(Path(path).resolve()).encode()).hexdigest()[:16]
    folder = runtime_dir() / "locks"
    folder.mkdir(parents=True, exist_ok=True)
    return FileLock(str(folder / f"baseline-{digest}.lock"), timeout=300)


def update_baselines(
    path: Path | str,
    entries: Iterable[BaselineEntry],
    *,
    hardware_profile: str | None = None,
    description: str | None = None,
) -> BaselineFile:
    """Merge ``entries`` into the file under its lock (re-read inside the lock, so entries
    written meanwhile by other workers are kept) and replace it atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with lock_for(path):
        current = load_baselines(path)
        for e in entries:
            current.entries[e.key.as_str()] = e
        if hardware_profile and not current.hardware_profile:
            current.hardware_profile = hardware_profile
        if description and not current.description:
            current.description = description
        write_atomic(path, dump(current))
    return current


def dump(bf: BaselineFile) -> str:
    """Stable text (sorted keys, 2-space indent) so a baseline update reviews as a small diff."""
    return json.dumps(bf.to_json(), indent=2, sort_keys=False, ensure_ascii=False) + "\n"


__all__ = [
    "INDEPENDENT_AFTER_H",
    "SCHEMA",
    "SOURCES",
    "TOLERANCE_SOURCES",
    "BaselineEntry",
    "BaselineFile",
    "BaselineMetric",
    "baseline_path",
    "dump",
    "fingerprint_diff",
    "fingerprint_digest",
    "independent_windows",
    "load_baselines",
    "make_entry",
    "measured_tolerance",
    "parse_baselines",
    "pass_labels",
    "update_baselines",
    "write_atomic",
]

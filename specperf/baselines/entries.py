"""The records of a baseline file: a metric's per-start values, an item's entry (metrics,
provenance, fingerprint, known issue), the file, and the fingerprint's digest and difference."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specperf.baseline_schema import SCHEMA
from specperf.baselines.passes import pass_labels
from specperf.config import ItemKey, KnownIssue, Rule
from specperf.dotted import flatten


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
        start (``verdict.variance.MIN_BASELINE_PASSES``)."""
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

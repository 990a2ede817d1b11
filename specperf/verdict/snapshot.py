"""The ``suite.json`` snapshot a results folder carries: the policies, rules and quarantines the
run was judged with, so a later ``specperf verdict`` judges it the same way. Its schema is
``SuiteSnapshot`` (what ``Suite.to_json`` writes, plus the run's own keys, which are kept)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from specperf.config import DEFAULT_METRICS, KnownIssue, MetricPolicy, Rule, parse_rules
from specperf.errors import ConfigError
from specperf.validation import Table, says, validate
from specperf.verdict.levels import AlphaSplit
from specperf.verdict.results import SUITE_SNAPSHOT


class PolicySnapshot(Table):
    """A resolved metric policy (``MetricPolicy.to_json``)."""

    name: str
    direction: Literal["higher", "lower", "equal"]
    tolerance: float
    gate: Literal["always", "measured", "never"] = "always"
    hardware_bound: bool = False
    length_dependent: bool = False

    def policy(self) -> MetricPolicy:
        return MetricPolicy(**self.model_dump())


class KnownIssueSnapshot(Table):
    """A quarantine as ``KnownIssue.to_json`` writes it."""

    reason: str
    link: str
    until_engine_version: str | None = None
    until_date: str | None = None
    match: dict[str, Any] | None = None
    metrics: list[str] | None = None

    def issue(self) -> KnownIssue:
        return KnownIssue.of(self)


class LevelsSnapshot(Table):
    """The per-check levels the run decided with (``levels.AlphaSplit``, from the whole matrix:
    a filtered run, a shard or one folder judged later must use the same ones)."""

    item: Annotated[float, Field(gt=0, le=1)]
    engine_wide: Annotated[float, Field(gt=0, le=1)]

    def split(self) -> AlphaSplit:
        return AlphaSplit(self.item, self.engine_wide)


class SuiteSnapshot(Table):
    """What a later verdict reads from ``suite.json``; the other keys of the file (the suite's
    name, source, hardware profile, ...) are the run's record and pass through."""

    unknown_key: ClassVar[str | None] = None
    metrics: dict[str, PolicySnapshot] | None = None
    rules: list[Annotated[dict[str, Any], says("expected an object (Rule.to_json)")]] = []
    known_issues: list[KnownIssueSnapshot] = []
    workload: dict[str, Any] | None = None
    baseline_folder: str | None = None
    selected: list[str] | None = None  # item keys the run selected (None: older folders)
    alpha: LevelsSnapshot | None = None  # the run's per-check levels (None: older folders)


def _snapshot(snap: Mapping[str, Any] | None, source: str = SUITE_SNAPSHOT) -> SuiteSnapshot:
    return validate(SuiteSnapshot, dict(snap or {}), source, table="an object")


def read_suite_snapshot(dirs: Iterable[Path | str]) -> dict[str, Any] | None:
    """The first folder's ``suite.json`` (validated: a bad one is a one-line error naming it)."""
    for d in dirs:
        p = Path(d) / SUITE_SNAPSHOT
        if p.is_file():
            try:
                data = json.loads(p.read_text(encoding="utf-8"))
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{p}: not valid JSON ({exc.msg})") from None
            if not isinstance(data, dict):
                raise ConfigError(f"{p}: <top>: expected a JSON object")
            _snapshot(data, str(p))
            return data
    return None


def selected_from_snapshots(dirs: Iterable[Path | str]) -> set[str] | None:
    """The item keys the run(s) selected (``selected`` in each ``suite.json``; shards: the
    union), or None when a folder does not say (older results: every missing reference is then
    treated as a failure to measure)."""
    out: set[str] = set()
    for d in dirs:
        p = Path(d) / SUITE_SNAPSHOT
        if not p.is_file():
            return None
        try:
            sel = json.loads(p.read_text(encoding="utf-8")).get("selected")
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{p}: not valid JSON ({exc.msg})") from None
        if not isinstance(sel, list):
            return None
        out.update(str(k) for k in sel)
    return out


def policies_from_snapshot(snap: Mapping[str, Any] | None) -> dict[str, MetricPolicy]:
    metrics = _snapshot(snap).metrics
    if not metrics:
        return dict(DEFAULT_METRICS)
    return {k: v.policy() for k, v in metrics.items()}


def alpha_from_snapshot(snap: Mapping[str, Any] | None) -> AlphaSplit | None:
    """The levels the run decided with (None: a folder whose snapshot records no levels; the
    verdict then recomputes them from the items it holds)."""
    levels = _snapshot(snap).alpha
    return levels.split() if levels else None


def known_issues_from_snapshot(snap: Mapping[str, Any] | None) -> list[KnownIssue]:
    return [ki.issue() for ki in _snapshot(snap).known_issues]


def rules_from_snapshot(snap: Mapping[str, Any] | None, source: str) -> list[Rule]:
    """The snapshot's rules (``Rule.to_json``) back in ``[[rules]]`` form, validated as such."""
    raw = []
    for r in _snapshot(snap, source).rules:
        d = {k: v for k, v in r.items() if v is not None and k != "match"}
        d.update(r.get("match") or {})
        if d.get("known_issue"):
            ki = dict(d["known_issue"])
            ki.pop("match", None)
            d["known_issue"] = {k: v for k, v in ki.items() if v not in (None, [], ())}
        d["reference_engine"] = r.get("reference_engine")
        raw.append({k: v for k, v in d.items() if v is not None})
    return list(parse_rules(raw, source, engine_names=None))

"""The ``suite.json`` snapshot a results folder carries: the policies, rules and quarantines the
run was judged with, so a later ``specperf verdict`` judges it the same way."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from specperf.config import DEFAULT_METRICS, KnownIssue, MetricPolicy, Rule, parse_rules
from specperf.errors import ConfigError
from specperf.verdict.results import SUITE_SNAPSHOT


def read_suite_snapshot(dirs: Iterable[Path | str]) -> dict[str, Any] | None:
    for d in dirs:
        p = Path(d) / SUITE_SNAPSHOT
        if p.is_file():
            try:
                return json.loads(p.read_text(encoding="utf-8"))
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{p}: not valid JSON ({exc.msg})") from None
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

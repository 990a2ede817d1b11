"""The history store: one directory per night (``night.json`` + ``summaries.jsonl``), written
atomically, listed in order, pruned to the newest N."""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from specperf.dotted import get_path
from specperf.errors import ConfigError
from specperf.report.load import (
    find_items,
    hardware_profile,
    read_json,
    read_jsonl,
)
from specperf.results import write_json_atomic
from specperf.summary_schema import check_summary

SCHEMA = 1
NIGHTS = "nights"
NIGHT_FILE = "night.json"
SUMMARIES_FILE = "summaries.jsonl"


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

"""Baseline files on disk: the path of a profile's file, reading and validating one, and
updating one under a file lock (re-read inside the lock, merged, replaced atomically), so N
xdist workers writing at once lose nothing and a reader never sees a half-written file."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from filelock import FileLock

from specperf.baseline_schema import BaselineFileSchema
from specperf.baselines.entries import BaselineEntry, BaselineFile, BaselineMetric
from specperf.config import ItemKey, parse_rules
from specperf.errors import ConfigError
from specperf.fileio import runtime_dir
from specperf.fileio import write_text_atomic as write_atomic
from specperf.validation import validate


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in name)


def baseline_path(baselines_dir: Path | str, profile: str, folder: str | None = None) -> Path:
    """``<dir>/<profile>.json`` (or ``<dir>/<folder>/<profile>.json`` for a suite that keeps
    its baselines apart); names are file-safe slugs. One file per profile: a second machine's
    ``--update-baselines`` can never overwrite the first's figures."""
    base = Path(baselines_dir) / _safe(folder) if folder else Path(baselines_dir)
    return base / f"{_safe(profile)}.json"


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
        out.rules = list(parse_rules(f.rules, str(path), engine_names=None))
        out.raw_rules = f.rules
    return out


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

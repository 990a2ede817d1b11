"""Reading what the plugin wrote: an item's enriched ``summary.json`` (``ItemResult``), a whole
results folder, and appending checks to ``verdicts.jsonl``.

The verdict judges files, never live objects, so ``specperf verdict`` on a saved folder and the
plugin at the end of a run reach the same result.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specperf.config import ItemKey
from specperf.errors import ConfigError
from specperf.fileio import append_lines, read_jsonl
from specperf.summary_schema import check_summary
from specperf.verdict.checks import Check

SUMMARY = "summary.json"
REQUESTS = "requests.jsonl"
SUITE_SNAPSHOT = "suite.json"
VERDICTS = "verdicts.jsonl"


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
        """The item's per-request records; bad lines (a crash mid-write) are left out."""
        if self.path is None or not (self.path / REQUESTS).exists():
            return []
        return read_jsonl(self.path / REQUESTS, skip_bad=True)


def load_item(path: Path) -> ItemResult:
    try:
        data = json.loads((path / SUMMARY).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path / SUMMARY}: cannot read: {exc}") from None
    return ItemResult(check_summary(data, str(path / SUMMARY)), path)


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


def unusable(res: ItemResult | None) -> str | None:
    """Why a result cannot feed a rule (None when it can)."""
    if res is None:
        return "not measured in this run"
    if res.summary.get("engine_died") or int(res.summary.get("failed") or 0) > 0:
        return f"{res.key.as_str()} had failed requests"
    return None


def write_verdicts(path: Path, checks: Iterable[Check]) -> None:
    """Append checks as JSON lines (each line whole; workers append under a lock)."""
    append_lines(path, "".join(json.dumps(c.to_json(), ensure_ascii=False) + "\n" for c in checks))

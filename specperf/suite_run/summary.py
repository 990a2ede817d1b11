"""The item's ``summary.json`` over its repeats: repeat 1's summary with the figures (medians and
intervals over repeats, or a bootstrap interval over requests) and each repeat's figures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from specperf import verdict as vd
from specperf.errors import SpecperfError
from specperf.fileio import write_text_atomic


def write_item_summary(
    item_dir: Path, summaries: list[dict[str, Any]], metrics: list[str], fresh_starts: bool
) -> dict[str, Any]:
    """Write the item's summary.json: repeat 1's summary with ``figures`` (medians and
    intervals over repeats, or a bootstrap interval over requests) and ``repeats``."""
    if not summaries:
        raise SpecperfError(f"{item_dir}: no run was measured")
    first = vd.ItemResult(summaries[0], item_dir)
    reqs = first.requests() if len(summaries) == 1 else []
    figures = vd.aggregate(summaries, metrics, reqs, fresh_starts=fresh_starts)
    summary = dict(summaries[0])
    summary["figures"] = figures
    summary["repeats"] = [
        {m: vd.figure(s, m) for m in figures}
        | {
            "engine_died": bool(s.get("engine_died")),
            "wall_clock": s.get("wall_clock"),
            "duration_s": s.get("duration_s"),
        }
        for s in summaries
    ]
    if len(summaries) > 1:
        summary["repeat_1"] = {m: vd.figure(summaries[0], m) for m in figures}
        for metric, fig in figures.items():
            _set_path(summary, metric, fig.get("value"))
        summary["completed"] = min(int(s.get("completed") or 0) for s in summaries)
        summary["failed"] = max(int(s.get("failed") or 0) for s in summaries)
        summary["engine_died"] = any(s.get("engine_died") for s in summaries)
        summary.setdefault("notes", []).append(
            f"figures are medians over {len(summaries)} repeats; requests.jsonl is repeat 1's"
        )
    write_text_atomic(item_dir / vd.SUMMARY, json.dumps(summary, indent=1, default=str) + "\n")
    return summary


def _set_path(d: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    cur = d
    for p in parts[:-1]:
        nxt = cur.get(p)
        if not isinstance(nxt, dict):
            return
        cur = nxt
    if parts[-1] in cur or value is not None:
        cur[parts[-1]] = value

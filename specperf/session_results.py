"""What the suite session writes for one item besides the measurement itself: the item's
``summary.json`` over its repeats (``write_item_summary``) and, when ``--update-baselines`` asks
for it, the item's baseline entry with its provenance (``update_baseline``). Plain functions of
the session's options, so ``session.SuiteSession`` keeps the steps of an item."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specperf import baselines as bl
from specperf import verdict as vd
from specperf.errors import SpecperfError
from specperf.fileio import append_jsonl, write_text_atomic

if TYPE_CHECKING:
    from specperf.session import ItemRun, SessionOptions


BASELINE_UPDATES = "baseline-updates.jsonl"  # one line per entry an update wrote


def report_only_line(item: str, metric: str, why: str) -> str:
    """The warning for a metric an update stored report-only (a gate that could not fail)."""
    return f"WARNING {item}: {metric} stored report-only: {why}"


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


def update_baseline(
    run: ItemRun,
    entry: bl.BaselineEntry | None,
    checks: list[vd.Check],
    opts: SessionOptions,
    baseline_file: Path,
    progress_line: Callable[[str], None],
) -> bool:
    """Write the item's baseline entry when the update mode asks for it (never from a run whose
    requests failed); True when written."""
    mode = opts.update
    if mode is None:
        return False
    run_ok = all(c.status != "fail" for c in checks if c.metric in ("engine", "failed_requests"))
    if not run_ok:
        return False  # never a baseline from a run whose requests failed
    no_baseline = any(c.status in ("missing", "stale") for c in checks)
    metric_failed = any(c.status == "fail" and not c.rule for c in checks)
    if mode == "missing" and not no_baseline:
        return False
    if mode == "failed" and not metric_failed:
        return False
    new = bl.make_entry(
        run.item.key,
        run.result.figures,
        opts.suite.metrics,
        fingerprint=run.result.fingerprint,
        provenance=provenance(run, opts),
        hardware_profile=opts.hardware_profile,
        previous=entry,
    )
    report_only = {metric: m.report_only for metric, m in new.metrics.items() if m.report_only}
    for metric, why in report_only.items():
        progress_line(report_only_line(run.item.id, metric, why))
    bl.update_baselines(baseline_file, [new], hardware_profile=opts.hardware_profile)
    record: dict[str, Any] = {
        "key": run.item.key.as_str(),
        "file": str(baseline_file),
        "mode": mode,
    }
    if report_only:  # the controller repeats these at the end (a worker's log is not shown)
        record.update(item=run.item.id, report_only=report_only)
    append_jsonl(Path(opts.results_dir) / BASELINE_UPDATES, record)
    return True


def provenance(run: ItemRun, opts: SessionOptions) -> dict[str, Any]:
    """Where, how and from how much the item's baseline entry was measured."""
    s = run.result.summary
    env = s.get("environment") or {}
    gpus = env.get("gpus") or []
    git = env.get("suite_git") or {}
    suite = opts.suite
    return {
        "source": "measured",
        "host": socket.gethostname(),
        "boot_id": env.get("boot_id"),
        "engine_version": run.engine_version,
        "engine_label": run.item.spec.label,
        "hardware_profile": opts.hardware_profile,
        "gpu": ", ".join(sorted({str(g.get("name")) for g in gpus})) or None,
        "driver": env.get("gpu_driver"),
        "cpu": env.get("cpu_model"),
        "cpu_signature": env.get("cpu_signature"),
        "suite": suite.name,
        "suite_commit": git.get("commit"),
        "suite_dirty": git.get("dirty"),
        "sample_size": {
            "requests": run.item.workload.num_requests,
            "repeats": len(run.summaries),
            "engine_starts": (len(run.summaries) if opts.restart_between_repeats else 1),
        },
        "results_dir": str(Path(opts.results_dir)),
        "how_measured": (
            f"specperf suite {suite.name}, item {run.item.id}: closed loop at "
            f"concurrency {run.item.workload.concurrency}, {run.item.workload.num_requests} "
            f"requests, {len(run.summaries)} repeat(s)"
            + (
                ", each on a fresh engine start"
                if opts.restart_between_repeats and len(run.summaries) > 1
                else ""
            )
            + ", value = median"
        ),
    }

"""``--update-baselines``: the item's baseline entry with its provenance, written when the
update mode asks for it (never from a run whose requests failed), and one line per entry in the
run's ``baseline-updates.jsonl``."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from specperf import baselines as bl
from specperf import verdict as vd
from specperf.fileio import append_jsonl
from specperf.suite_run.options import ItemRun, RunOptions

BASELINE_UPDATES = "baseline-updates.jsonl"  # one line per entry an update wrote


def report_only_line(item: str, metric: str, why: str) -> str:
    """The warning for a metric an update stored report-only (a gate that could not fail)."""
    return f"WARNING {item}: {metric} stored report-only: {why}"


def update_baseline(
    run: ItemRun,
    entry: bl.BaselineEntry | None,
    checks: list[vd.Check],
    opts: RunOptions,
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


def provenance(run: ItemRun, opts: RunOptions) -> dict[str, Any]:
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

"""One watched engine, end to end: newest release, both environments, the pinned runs around
the candidate run, the judgement and the comparison report."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from specperf.errors import SpecperfError
from specperf.release_versions import (
    VersionSource,
    is_newer,
    newest,
)
from specperf.release_watch.judging import judge
from specperf.release_watch.outcome import WatchResult
from specperf.release_watch.running import Runner, _safe, pytest_command, run_logged
from specperf.release_watch.targets import Target


def watch_target(
    target: Target,
    *,
    suite: str,
    source: VersionSource,
    results_dir: Path,
    candidate: str | None = None,
    pre: bool = False,
    settings: Mapping[str, str] | None = None,
    pytest_args: Sequence[str] = (),
    python: str = sys.executable,
    runner: Runner = run_logged,
    make_report: bool = True,
    pinned_runs: int = 3,
) -> WatchResult:
    """Pinned vs newest release of one engine (see the module doc). ``pinned_runs`` > 1 runs
    the pinned release that many times around the candidate (half before, the rest after:
    P C P, P P C P, P P C P P …), each run a pass of the baseline (judging.py says why)."""
    if pinned_runs < 1:
        raise SpecperfError(f"--pinned-runs {pinned_runs}: must be >= 1")
    settings = dict(settings or {})
    settings.pop(target.setting, None)
    res = WatchResult(target, suite, candidate, "error", "")
    if candidate is None:
        found = newest(source.versions(target.package), pre=pre)
        if found is None:
            res.message = f"no release of {target.package} found"
            return res
        res.candidate = found
        if not is_newer(found, target.pinned):
            res.status = "up-to-date"
            res.message = (
                f"{target.package}: newest release {found} is not newer than the pinned "
                f"{target.pinned}; nothing to compare"
            )
            return res
    cand = res.candidate or ""
    base = results_dir / _safe(target.engine)
    log = base / "watch.log"
    pinned_dir = base / f"pinned-{_safe(target.pinned)}"
    pinned_dirs = [pinned_dir] + [
        base / f"pinned-{_safe(target.pinned)}-run{i}" for i in range(2, pinned_runs + 1)
    ]
    cand_dir = base / f"candidate-{_safe(cand)}"
    res.pinned_dir, res.candidate_dir = str(pinned_dir), str(cand_dir)
    res.pinned_dirs = [str(d) for d in pinned_dirs]
    if target.uses_env:
        for which, ver in (("pinned", target.pinned), ("candidate", cand)):
            cmd = [python, "-m", "specperf.cli", "env", "create", target.env_spec(ver)]
            if runner(cmd, log) != 0:
                res.message = f"{which} environment {target.env_spec(ver)} could not be created"
                if which == "candidate":
                    res.status = "regression"
                    res.failures.append(f"{target.package} {ver} does not install (see {log})")
                return res
    before = (pinned_runs + 1) // 2  # the candidate sits in the middle of the pinned runs
    runs = [("pinned", target.pinned, d) for d in pinned_dirs[:before]]
    runs.append(("candidate", cand, cand_dir))
    runs += [("pinned", target.pinned, d) for d in pinned_dirs[before:]]
    for k, (which, ver, out) in enumerate(runs, 1):
        line = f"watch: run {k} of {len(runs)}: {which} {ver}"
        if which == "candidate":  # judged in-run against the pinned runs so far only
            line += (
                f"; its own verdict below is provisional (against the {before} pinned run(s) so "
                f"far); the watch judges it against all {pinned_runs} after the last run"
            )
        _announce(log, line)
        scratch = base / f"baselines-{which}"  # the repository's baselines stay out
        if which == "candidate" or out == pinned_dir:  # later pinned runs append their starts
            shutil.rmtree(scratch, ignore_errors=True)
        if which == "candidate" and (base / "baselines-pinned").is_dir():
            # the pinned run's entries fix each item's request count (an item its first start
            # found too short is sized: specperf.workload.sizing), so both releases measure
            # the same workload; without them a release just slow enough to pass the minimum
            # duration would measure the suite's count and be judged stale, not slower
            shutil.copytree(base / "baselines-pinned", scratch)
        cmd = pytest_command(
            python,
            suite,
            target,
            ver,
            out,
            scratch,
            settings,
            pytest_args,
            update_baselines=which == "pinned",
        )
        rc = runner(cmd, log)
        if rc not in (0, 1):
            res.notes.append(f"{out.name} run ended with pytest exit code {rc} (see {log})")
    try:
        failures, notes, counts = judge(pinned_dirs, cand_dir)
    except SpecperfError as exc:
        res.message = f"cannot judge {target.package} {cand}: {exc}"
        return res
    res.notes += notes
    res.counts = counts
    res.failures = [c.line() if hasattr(c, "line") else str(c) for c in failures]
    if make_report and cand_dir.is_dir():
        report_dir = base / "report"
        cmd = [python, "-m", "specperf.cli", "report", str(cand_dir), "--compare", str(pinned_dir)]
        if runner([*cmd, "--out", str(report_dir)], log) == 0:
            res.report = str(report_dir)
        else:
            res.notes.append(f"the report could not be written (see {log})")
    if failures:
        res.status = "regression"
        res.message = (
            f"REGRESSION in {target.package} {cand} (candidate) against the pinned "
            f"{target.pinned}, suite {suite}: {len(failures)} failing check(s)"
        )
    else:
        res.status = "pass"
        res.message = (
            f"{target.package} {cand} matches the pinned {target.pinned} on suite {suite} "
            f"({counts.get('pass', 0)} checks passed)"
        )
    return res


def _announce(log: Path, line: str) -> None:
    """Print ``line`` and append it to the watch log."""
    log.parent.mkdir(parents=True, exist_ok=True)
    print(f"== {line}", flush=True)
    with log.open("a", encoding="utf-8") as fh:
        fh.write(f"== {line}\n")

#!/usr/bin/env python3
"""TEST-ONLY: the observed half of docs/baselines.md's verdict proofs — run the main job under a
known condition N times and count how many runs the verdict turns red.

    python -m benchmarks.verdict_proofs run --condition unchanged --runs 10 --out proofs/
    python -m benchmarks.verdict_proofs run --condition throttle --share 0.10 --runs 10 --out p/
    python -m benchmarks.verdict_proofs run --condition throttle --share 0.25 --match ngram ...
    python -m benchmarks.verdict_proofs run --condition reject --q 0.045 --runs 10 --out proofs/
    python -m benchmarks.verdict_proofs judge proofs/*/run-*      # re-judge saved runs, one table

Conditions (each applied to the ENGINE only; the client and the verdict are unchanged):
- ``unchanged``: nothing; every red run is a false alarm.
- ``throttle``: tests/tools/throttle_engine.py stops the engines' process groups ``share`` of the
  wall time (``--match`` limits it to one method's engine), i.e. a known slowdown.
- ``reject``: tests/tools/reject_drafts makes vLLM reject a seeded share ``q`` of the draft
  tokens, i.e. a known MAL drop at unchanged outputs.

Each run is the main job (``pytest -m perf``, the suite's defaults) into ``OUT/<label>/run-<i>``,
then ``specperf verdict`` against the committed baselines; ``OUT/<label>/proofs.json`` keeps per
run: red or green, the failing checks, and the engine-wide estimates with their p values. The
resampling predictions for the same effects are on docs/validation/ (`specperf validation`);
the two are meant to be read side by side. Bounded: ``--runs`` ≤ 50, each run ≤ ``--run-timeout``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from specperf.errors import SpecperfError
from specperf.verdict import ENGINE_WIDE_RULE, evaluate_results

ROOT = Path(__file__).resolve().parents[1]

VENV_BIN = Path(sys.executable).parent
MAX_RUNS = 50


def _label(args: argparse.Namespace) -> str:
    if args.condition == "throttle":
        return f"throttle-{args.share:g}" + (f"-{args.match}" if args.match else "")
    if args.condition == "reject":
        return f"reject-{args.q:g}"
    return "unchanged"


def _one_run(args: argparse.Namespace, run_dir: Path, seed: int) -> dict[str, Any]:
    env = dict(os.environ)
    throttle = None
    if args.condition == "reject":
        tools = str(ROOT / "tests" / "tools" / "reject_drafts")
        env["PYTHONPATH"] = tools + os.pathsep + env.get("PYTHONPATH", "")
        env["SPECPERF_TEST_REJECT_DRAFTS"] = str(args.q)
        env["SPECPERF_TEST_REJECT_SEED"] = str(seed)
    cmd = [str(VENV_BIN / "pytest"), "-m", "perf", "-q", "-p", "no:cacheprovider"]
    cmd += ["--results-dir", str(run_dir), *args.pytest_args]
    log = run_dir.with_suffix(".log")
    t0 = time.monotonic()
    if args.condition == "throttle":
        tcmd = [sys.executable, str(ROOT / "tests" / "tools" / "throttle_engine.py")]
        tcmd += ["--share", str(args.share), "--duration", str(args.run_timeout)]
        if args.match:
            tcmd += ["--match", args.match]
        tcmd += ["--report", str(run_dir.with_suffix(".throttle.json"))]  # share_held per engine
        throttle = subprocess.Popen(tcmd)
    try:
        with log.open("w") as fh:
            rc = subprocess.run(
                cmd,
                cwd=ROOT,
                env=env,
                stdout=fh,
                stderr=subprocess.STDOUT,
                timeout=args.run_timeout,
                check=False,
            ).returncode
    finally:
        if throttle is not None:
            throttle.send_signal(signal.SIGTERM)
            throttle.wait(timeout=30)
    out: dict[str, Any] = {
        "dir": str(run_dir),
        "pytest_rc": rc,
        "wall_s": round(time.monotonic() - t0, 1),
    }
    report = run_dir.with_suffix(".throttle.json")
    if throttle is not None and report.exists():  # the share each engine really lost
        groups = json.loads(report.read_text())["groups"].values()
        out["throttle_share_held"] = [g["share_held"] for g in groups if g["cycles"]]
    return out


def judge(run_dir: Path, baselines_dir: Path | None) -> dict[str, Any]:
    """The verdict of one saved run: red/green, failing checks, engine-wide estimates."""
    v = evaluate_results([run_dir], baselines_dir=baselines_dir or ROOT / "baselines")
    failed = [c for c in v.checks if c.status == "fail"]
    wide = {
        c.metric.replace("engine-wide ", ""): {
            "ratio": c.measured,
            "status": c.status,
            "p": c.p_value,
            "reason": c.reason,
        }
        for c in v.checks
        if c.rule == ENGINE_WIDE_RULE
    }
    not_eval = [
        c for c in v.checks if c.gated and c.status in ("not_evaluated", "missing", "stale")
    ]
    return {
        "dir": str(run_dir),
        "red": bool(failed),
        "failed": [
            f"{c.key} {c.metric} {c.delta:+.1%}" if c.delta is not None else f"{c.key} {c.metric}"
            for c in failed
        ],
        "engine_wide": wide,
        "gated_not_evaluated": len(not_eval),
    }


def cmd_run(args: argparse.Namespace) -> int:
    if not 1 <= args.runs <= MAX_RUNS:
        print(f"--runs {args.runs}: between 1 and {MAX_RUNS}", file=sys.stderr)
        return 2
    out = args.out / _label(args)
    out.mkdir(parents=True, exist_ok=True)
    # appends to the runs already there, so a campaign can be run in pieces (--runs 1 at a time)
    saved = out / "proofs.json"
    rows = json.loads(saved.read_text()) if saved.exists() else []
    first = len(rows) + 1
    for i in range(first, first + args.runs):
        run_dir = out / f"run-{i}"
        print(
            f"[{time.strftime('%H:%M:%S')}] {_label(args)} run {i} -> {run_dir}",
            flush=True,
        )
        info = _one_run(args, run_dir, seed=i)
        info.update(judge(run_dir, args.baselines_dir))
        rows.append(info)
        print(
            f"    {'RED' if info['red'] else 'green'} in {info['wall_s']} s; "
            + "; ".join(info["failed"][:4]),
            flush=True,
        )
        saved.write_text(json.dumps(rows, indent=2) + "\n")
    red = sum(r["red"] for r in rows)
    print(f"{_label(args)}: {red}/{len(rows)} runs red")
    return 0


def cmd_judge(args: argparse.Namespace) -> int:
    # `run-*` also matches the run-N.log / run-N.throttle.json that `run` writes beside each run
    side_files = {".log", ".json"}
    for d in args.runs_dirs:
        if d.is_file() and d.suffix in side_files:
            continue
        r = judge(d, args.baselines_dir)
        wide = " ".join(
            f"{m[:10]}={w['ratio']:.3f} (p={w['p']:.2g})"
            if w["ratio"] is not None and w["p"] is not None
            else f"{m[:10]}=n/a"
            for m, w in sorted(r["engine_wide"].items())
        )
        print(
            f"{'RED  ' if r['red'] else 'green'} {d}  {wide}  "
            f"gated-not-evaluated={r['gated_not_evaluated']}  " + "; ".join(r["failed"][:5])
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.verdict_proofs", description=__doc__.split("\n\n")[0]
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run the main job N times under a condition")
    r.add_argument("--condition", choices=("unchanged", "throttle", "reject"), required=True)
    r.add_argument("--runs", type=int, default=10)
    r.add_argument("--share", type=float, default=0.10, help="throttle: share of time stopped")
    r.add_argument("--match", default=None, help="throttle: only this method's engine")
    r.add_argument("--q", type=float, default=0.045, help="reject: draft rejection probability")
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--run-timeout", type=float, default=1200.0, help="seconds per run (bound)")
    r.add_argument("--baselines-dir", type=Path, default=None)
    r.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    j = sub.add_parser("judge", help="judge saved runs against the baselines, one line each")
    j.add_argument("runs_dirs", nargs="+", type=Path)
    j.add_argument("--baselines-dir", type=Path, default=None)
    args = ap.parse_args(argv)
    try:
        return cmd_run(args) if args.cmd == "run" else cmd_judge(args)
    except SpecperfError as e:  # a missing run directory, a bad baseline file: one line
        print(f"verdict_proofs: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())

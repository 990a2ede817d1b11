"""The suite repository the GPU night runs against (its ``tests/perf``, ``baselines/``, the packaged
suite file) and how its commands run: with the checkout first on PYTHONPATH, logged, stopped at a
time limit."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]  # the checkout (or site folder) holding specperf/

SUITE = ROOT / "specperf" / "suites" / "h200-transformers.toml"
TIMED_OUT = 124  # a pass stopped at --pass-timeout (as timeout(1) exits)


def suite_settings(args: argparse.Namespace, models_dir: Path) -> dict[str, str]:
    """--setting values for the suite: models, device, and the EAGLE3 head chosen by
    prepare_eagle3_head (``args.head_settings``)."""
    return {
        "models_dir": str(models_dir),
        "device": args.device,
        **getattr(args, "head_settings", {}),
    }


def repo_env() -> dict[str, str]:
    """This environment with the checkout first on PYTHONPATH."""
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }


def run_logged(
    cmd: list[str], env: dict[str, str], log: Path, timeout_s: float, cwd: Path = ROOT
) -> int:
    """Run ``cmd`` in its own session with output to ``log``; past ``timeout_s`` TERM then KILL
    the whole group (engines die with their owner: ServerProcess watchdog) and return 124."""
    with log.open("w") as fh:
        proc = subprocess.Popen(
            cmd, cwd=cwd, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            return proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            fh.write(f"\n# stopped after {timeout_s:.0f} s\n")
            return TIMED_OUT


def default_root() -> Path:
    """The suite repository: the checkout this package is imported from when it holds
    ``tests/perf``, else the working directory."""
    return ROOT if (ROOT / "tests" / "perf").is_dir() else Path.cwd()

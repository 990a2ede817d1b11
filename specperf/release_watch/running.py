"""Running the suite for one release: the pytest command line, and a child process whose
output is streamed to our stdout and to a log."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from specperf.release_watch.targets import Target

# --------------------------------------------------------------------------- running
Runner = Callable[[Sequence[str], Path], int]


def child_env() -> dict[str, str]:
    """Our environment without a surrounding pytest-xdist worker's identity: the suite runs we
    start are top-level pytest sessions, not workers of the session that started the watch."""
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("PYTEST_XDIST_") and k != "PYTEST_CURRENT_TEST"
    }


def run_logged(cmd: Sequence[str], log: Path) -> int:
    """Run a command, streaming its output to our stdout and to ``log``; its exit code."""
    log.parent.mkdir(parents=True, exist_ok=True)
    print(f"$ {shlex.join(cmd)}", flush=True)
    with log.open("a", encoding="utf-8") as fh:
        fh.write(f"$ {shlex.join(cmd)}\n")
        fh.flush()
        proc = subprocess.Popen(
            list(cmd),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
            env=child_env(),
        )
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                sys.stdout.write(line)
                fh.write(line)
            return proc.wait()
        except BaseException:
            proc.terminate()  # pytest tears its engines down on SIGTERM
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            raise


def pytest_command(
    python: str,
    suite: str,
    target: Target,
    version: str,
    results: Path,
    scratch_baselines: Path,
    settings: Mapping[str, str],
    pytest_args: Sequence[str],
    *,
    update_baselines: bool = False,
) -> list[str]:
    """The suite run for one version; ``update_baselines`` writes its entries into the scratch
    baselines directory (the pinned run's, copied for the candidate: see the package doc)."""
    cmd = [python, "-m", "pytest", "-m", "perf", "-p", "no:cacheprovider", "--suite", suite]
    cmd += ["--engine", target.engine, "--results-dir", str(results)]
    cmd += ["--baselines-dir", str(scratch_baselines)]
    if update_baselines:
        cmd.append("--update-baselines")
    for k, v in {**settings, target.setting: target.setting_value(version)}.items():
        cmd += ["--setting", f"{k}={v}"]
    return cmd + list(pytest_args)


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.+-]", "-", text)

"""SIGKILL of a pytest process mid-run (a request in flight, no teardown can run) leaves no vLLM
process behind: the parent-death signal and the watchdog take the engine's group down."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from specperf.engines.process import group_members
from tests.integration.conftest import START_TIMEOUT_S

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


def alive(pid: int, create_time: float) -> bool:
    try:
        p = psutil.Process(pid)
        return abs(p.create_time() - create_time) < 0.05 and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_sigkill_of_pytest_leaves_no_vllm_process(
    vllm_python: str, tiny_model: Path, tmp_path: Path
) -> None:
    info_path = tmp_path / "owner.json"
    env = {**os.environ, "SPECPERF_SIGKILL_INFO": str(info_path)}
    owner = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-s",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            str(REPO / "tests" / "integration" / "sigkill_owner.py"),
            f"--basetemp={tmp_path / 'inner'}",
        ],
        cwd=REPO,
        env=env,
        stdout=open(tmp_path / "owner.log", "wb"),  # noqa: SIM115 - closed with the process
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    info = None
    try:
        deadline = time.monotonic() + START_TIMEOUT_S + 60
        while time.monotonic() < deadline and owner.poll() is None and not info_path.exists():
            time.sleep(0.5)
        assert info_path.exists(), (tmp_path / "owner.log").read_text()[-3000:]
        info = json.loads(info_path.read_text())
        assert len(info["procs"]) >= 2  # api server + engine core (+ worker)
        assert all(alive(pid, ct) for pid, ct in info["procs"])
        os.kill(info["pytest_pid"], signal.SIGKILL)
        owner.wait(timeout=30)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and any(alive(p, c) for p, c in info["procs"]):
            time.sleep(0.5)
        survivors = [p for p, c in info["procs"] if alive(p, c)]
        assert survivors == [], f"vLLM processes survived their pytest's SIGKILL: {survivors}"
        assert not group_members(info["pgid"])
    finally:
        if owner.poll() is None:
            owner.kill()
        if info:
            for pid, ct in info["procs"]:
                if alive(pid, ct):
                    psutil.Process(pid).kill()

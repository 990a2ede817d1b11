"""The research commands kept in the tree (benchmarks/, scripts/ besides setup.sh, which is
set-up) stay runnable:
each answers --help without an engine, a GPU or the network. What they measure is documented
where their figures are used (docs/measurement.md, docs/baselines.md, docs/transformers.md,
docs/datasets.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = [
    "benchmarks/bench_vs_vllm.py",
    "benchmarks/client_distortion.py",
    "benchmarks/numerics_profiles.py",
    "benchmarks/verdict_proofs.py",
    "scripts/build_fixtures.py",
    "scripts/eagle3_crosscheck.py",
]


def test_every_command_is_listed() -> None:
    """A new script is either listed here (kept, smoke-tested) or not committed."""
    kept = {"scripts/setup.sh"}
    kept |= {"benchmarks/vllm_bench_client.py"}  # a helper module of bench_vs_vllm.py
    found = {
        p.relative_to(ROOT).as_posix()
        for d in ("benchmarks", "scripts")
        for p in (ROOT / d).glob("*")
        if p.is_file()
    }
    assert found - kept == set(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_help(command: str) -> None:
    r = subprocess.run(
        [sys.executable, str(ROOT / command), "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr
    assert "usage:" in r.stdout

"""The tools kept in the tree besides the `specperf` subcommands (benchmarks/, tests/tools/
build_fixtures.py; scripts/ holds set-up only) stay runnable: each answers --help, run as
``python -m`` from the repository root, without an engine, a GPU or the network. What they
measure is documented where their figures are used (docs/measurement.md, docs/baselines.md,
docs/verdict.md, docs/datasets.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = [
    "benchmarks.bench_vs_vllm",
    "benchmarks.client_distortion",
    "benchmarks.numerics_profiles",
    "benchmarks.verdict_proofs",
    "tests.tools.build_fixtures",
]


def test_every_command_is_listed() -> None:
    """A new script is either listed here (kept, smoke-tested) or not committed; scripts/ keeps
    set-up only."""
    kept = {"scripts/setup.sh", "benchmarks/__init__.py"}
    kept |= {"benchmarks/vllm_bench_client.py"}  # a helper module of bench_vs_vllm.py
    found = {
        p.relative_to(ROOT).as_posix()
        for d in ("benchmarks", "scripts")
        for p in (ROOT / d).glob("*")
        if p.is_file()
    }
    listed = {c.replace(".", "/") + ".py" for c in COMMANDS if c.startswith("benchmarks.")}
    assert found - kept == listed


@pytest.mark.parametrize("command", COMMANDS)
def test_help(command: str) -> None:
    r = subprocess.run(
        [sys.executable, "-m", command, "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr
    assert f"usage: python -m {command}" in r.stdout

"""The test-model and head-fitting tooling lives in specperf.testkit; its old homes
(specperf.testmodels, specperf.eagle3.fit) re-export every public name as the same object and
still run as ``python -m``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_testmodels_reexports_the_testkit_models() -> None:
    from specperf import testmodels
    from specperf.testkit import models

    assert testmodels.__all__ == models.__all__
    for name in models.__all__:
        assert getattr(testmodels, name) is getattr(models, name), name


def test_eagle3_fit_reexports_the_testkit_fit() -> None:
    pytest.importorskip("torch")
    from specperf.eagle3 import fit
    from specperf.testkit import eagle3_fit

    assert fit.__all__ == eagle3_fit.__all__
    for name in eagle3_fit.__all__:
        assert getattr(fit, name) is getattr(eagle3_fit, name), name


def test_python_m_testmodels_still_runs(tmp_path: Path) -> None:
    from specperf.testkit.models import tiny_model_path

    out = _run("specperf.testmodels", "path")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(tiny_model_path())


def test_python_m_eagle3_fit_still_runs() -> None:
    pytest.importorskip("torch")
    out = _run("specperf.eagle3.fit", "--help")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: python -m specperf.eagle3.fit")
    assert "--head-shape" in out.stdout

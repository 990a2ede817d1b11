"""Shared pieces of the release matrix and bisect tests: a calibration suite whose engine
behaves per release (tests.calibration.releases), and a runner that fakes ``specperf env
create`` (a release listed as uninstallable fails with a one-line reason) and runs the suite's
pytest for real."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest
from packaging.version import Version

import tests.calibration.releases  # noqa: F401 - registers the engine kind for this process
from specperf.release_watch import Target, run_logged

ROOT = Path(__file__).resolve().parents[3]
PLUGIN = "tests.calibration.releases"
# from 1.3 on ngram accepts one token per step instead of 2,3,1 (MAL 3.0 -> 2.0)
STEP = {"1.3": {"accept_pattern": "1,1,1"}}

SUITE = """
[settings]
calib_version = "1.0"

[suite]
name = "matrix-calibration"
tier = "smoke"

[engines.calib]
kind = "calibration-releases"
label = "calib"
env = {{ SPECPERF_RELEASE = "${{calib_version}}" }}
options = {{ step_ms = 2, ttft_ms = 5, output_tokens = 12, accept_pattern = "2,3,1", \
release_steps = '{steps}' }}

[models.calib-model]
path = "calibration-model"

[models.calib-model.methods.ngram]
num_speculative_tokens = 3

[datasets.mt-bench]
concurrency = [1]
requests = [3]

[output]
max_tokens = 12

[sampling.greedy]
temperature = 0

[workload]
warmup_requests = 1
min_duration_s = 0

[metrics.output_tokens]
gate = "always"
tolerance = 0.02
"""

TARGET = Target("calib", "calibration", "calib_version", "1.0", True)


def write_suite(tmp_path: Path, steps: dict | None = None) -> Path:
    p = tmp_path / "suite.toml"
    p.write_text(SUITE.format(steps=json.dumps(STEP if steps is None else steps)))
    return p


PYTEST_ARGS = ["-p", PLUGIN, "tests/perf", "-q"]


class EnvFaker:
    """``env create`` answered here (exit 1 with a one-line reason for the releases in
    ``broken``); every other command run for real. Records every command."""

    def __init__(self, broken: dict[str, str] | None = None, stop_after: int | None = None):
        self.broken = broken or {}
        self.calls: list[list[str]] = []
        self.stop_after = stop_after  # raise KeyboardInterrupt at this pytest run (1-based)

    @property
    def pytest_runs(self) -> list[list[str]]:
        return [c for c in self.calls if c[1:3] == ["-m", "pytest"]]

    def __call__(self, cmd: Sequence[str], log: Path) -> int:
        cmd = list(cmd)
        self.calls.append(cmd)
        if cmd[1:5] == ["-m", "specperf.cli", "env", "create"]:
            release = cmd[5].split("==", 1)[1]
            log.parent.mkdir(parents=True, exist_ok=True)
            with log.open("a") as fh:
                fh.write(f"$ {' '.join(cmd)}\n")
                if release in self.broken:
                    fh.write(f"specperf env: error: {cmd[5]}: {self.broken[release]}\n")
                    return 1
            return 0
        if self.stop_after is not None and len(self.pytest_runs) == self.stop_after:
            raise KeyboardInterrupt
        return self.suite_run(cmd, log)

    def suite_run(self, cmd: list[str], log: Path) -> int:
        return run_logged(cmd, log)


FIXTURES = ROOT / "tests" / "fixtures_results"
FIXTURE_ITEM = "vllm-eagle3-mt-bench-c1"
FIXTURE_ITEM_KEY = "qwen3-8b/vllm/eagle3/mt-bench/c1/greedy"


class FixtureRunner(EnvFaker):
    """No engine: each suite run lays down the committed results (tests/fixtures_results),
    the release reported as the engine version. ``mal`` plants a step: either
    ``{first release: factor}`` (the fixture item's MAL times the factor from that release on)
    or ``f(release, run number) -> MAL or None``."""

    def __init__(
        self,
        mal: Mapping[str, float] | Callable[[str, int], float | None],
        broken: dict[str, str] | None = None,
        stop_after: int | None = None,
        packages: Callable[[str], dict[str, str]] | None = None,
        speed: Mapping[str, float] | None = None,
        refuse: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        super().__init__(broken, stop_after)
        self.mal = mal
        self.speed = speed or {}  # {first release: factor} on the fixture item's tok/s
        # {release: {method: why}}: the engine refuses the method in that release (its items
        # are skipped as NOT EVALUATED and the refusal is in engine-starts.jsonl)
        self.refuse = refuse or {}
        self.packages = packages  # release -> the engine env's package versions recorded

    def suite_run(self, cmd: list[str], log: Path) -> int:
        version = next(a.split("=", 1)[1] for a in cmd if a.startswith("calib_version="))
        out = Path(cmd[cmd.index("--results-dir") + 1])
        shutil.copytree(FIXTURES / "run-main", out)
        for f in out.glob("*/summary.json"):
            s = json.loads(f.read_text())
            s["engine_version"] = version
            if self.packages is not None:
                pkgs = dict(self.packages(version))
                env = {"torch_build": pkgs.pop("torch_build", None), "versions": pkgs}
                s["environment"]["engine"]["env"] = env  # as the engine record holds it
            if f.parent.name == FIXTURE_ITEM:
                factor = self._step(self.speed, version)
                if factor is not None:
                    fig = s["figures"]["output_throughput_tok_s"]
                    s["output_throughput_tok_s"] *= factor
                    fig["value"] *= factor
                    fig["starts"] = [v * factor for v in fig["starts"]]
                    fig.pop("interval", None)
                mal = self._mal(version, len(self.pytest_runs), s["mean_acceptance_length"])
                if mal is not None:
                    s["mean_acceptance_length"] = mal
                    s["figures"]["mean_acceptance_length"] = {"value": mal, "starts": [mal]}
            f.write_text(json.dumps(s))
            method = s["key"].split("/")[2] if isinstance(s["key"], str) else s["key"]["method"]
            if method in self.refuse.get(version, {}):
                shutil.rmtree(f.parent)
        with (out / "engine-starts.jsonl").open("a") as fh:
            for method, why in self.refuse.get(version, {}).items():
                ev = {"event": "start_failed", "method": method, "error": why}
                fh.write(json.dumps(ev) + "\n")
        return 0

    def _mal(self, version: str, n: int, base: float) -> float | None:
        if callable(self.mal):
            return self.mal(version, n)
        factor = self._step(self.mal, version)
        return None if factor is None else base * factor

    @staticmethod
    def _step(steps: Mapping[str, float], version: str) -> float | None:
        """The factor of the latest step at or below ``version`` (None: before every step)."""
        on = [
            f
            for start, f in sorted(steps.items(), key=lambda kv: Version(kv[0]))
            if Version(version) >= Version(start)
        ]
        return on[-1] if on else None


@pytest.fixture
def in_repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.setenv("PYTEST_ADDOPTS", "")
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    )

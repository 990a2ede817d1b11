"""The calibration ENGINE kind: the calibration server started through ServerProcess, exactly as
a real server engine is, so the suite's fixtures (engine pool, devices, start log, measurement,
baselines, verdicts) can be proven on an engine whose speed and acceptance are known.

Dials (EngineSpec ``options``, i.e. a suite's ``[engines.X.options]`` or a method's options):
  step_ms, ttft_ms     decode-step interval and time to first token (ms)
  speed                throughput factor: every delay is divided by it (0.9 = 10 % slower)
  accept_pattern       accepted draft tokens per verify step, cycled (list or "3,3,2")
  accept_prob          per-position acceptance probability instead of a pattern
  output_tokens        natural output length; output_tokens_max for per-prompt lengths
  jitter               ± fraction of the step interval
  config               any other CalibrationConfig field as a JSON object (string)
K is the spec's ``num_speculative_tokens`` (0 for native).

Registered as kind "calibration" by the top-level conftest.py (``register_calibration()``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from specperf.engines.base import Devices, EngineClient, EngineSpec
from specperf.engines.server_engine import LaunchPlan, RecordFacts, ServerEngine
from specperf.errors import ConfigError
from tests.calibration.client import CalibrationClient

REPO_ROOT = Path(__file__).resolve().parents[2]
KIND = "calibration"
_OPTION_KEYS = {
    "step_ms",
    "ttft_ms",
    "speed",
    "accept_pattern",
    "accept_prob",
    "output_tokens",
    "output_tokens_max",
    "jitter",
    "config",
    "token_ids",
    "max_concurrency",
    "batch_slowdown",
    "version",
}


def server_config(spec: EngineSpec) -> dict[str, Any]:
    """CalibrationConfig fields for a spec (the JSON given to the server's --config)."""
    opts = dict(spec.options)
    unknown = sorted(set(opts) - _OPTION_KEYS)
    if unknown:
        raise ConfigError(
            f"calibration engine {spec.label}: unknown option(s) {', '.join(unknown)} "
            f"(known: {', '.join(sorted(_OPTION_KEYS))})"
        )
    speed = float(opts.get("speed", 1.0))
    if speed <= 0:
        raise ConfigError(f"calibration engine {spec.label}: option speed must be > 0")
    cfg: dict[str, Any] = {
        "model": spec.served_model_name or spec.model,
        "ttft_s": float(opts.get("ttft_ms", 20.0)) / 1000 / speed,
        "step_interval_s": float(opts.get("step_ms", 5.0)) / 1000 / speed,
        "num_speculative_tokens": 0 if spec.is_native else int(spec.num_speculative_tokens or 0),
        "output_tokens": int(opts.get("output_tokens", 64)),
        "interval_jitter": float(opts.get("jitter", 0.0)),
        "batch_slowdown": float(opts.get("batch_slowdown", 0.0)),
    }
    if opts.get("version"):
        cfg["version"] = str(opts["version"])
    if opts.get("output_tokens_max") is not None:
        cfg["output_tokens_max"] = int(opts["output_tokens_max"])
    if not spec.is_native:
        pattern = opts.get("accept_pattern")
        if isinstance(pattern, str):
            pattern = [int(x) for x in pattern.split(",") if x.strip()]
        if pattern:
            cfg["accept_pattern"] = [int(x) for x in pattern]
        if opts.get("accept_prob") is not None:
            cfg["accept_prob"] = float(opts["accept_prob"])
    if opts.get("config"):
        extra = opts["config"]
        cfg.update(json.loads(extra) if isinstance(extra, str) else dict(extra))
    return cfg


class CalibrationEngine(ServerEngine):
    """Starts ``python -m tests.calibration.server`` through the same ServerEngine lifecycle as
    the real server engines."""

    kind = KIND

    def __init__(self, spec: EngineSpec, devices: Devices, log_dir: Path) -> None:
        super().__init__(spec, devices, log_dir)
        self.config = server_config(spec)

    def launch_plan(self, port: int) -> LaunchPlan:
        python = self.spec.python or sys.executable
        argv = [python, "-m", "tests.calibration.server", "--port", str(port)]
        argv += ["--config", json.dumps(self.config, sort_keys=True)]
        env = {"PYTHONPATH": str(REPO_ROOT), **dict(self.spec.env), **self.devices.env()}
        return LaunchPlan(argv, env, cwd=REPO_ROOT, grace_s=5.0)

    def connect(self) -> EngineClient:
        token_ids = bool(self.spec.option("token_ids", False))
        cap = self.spec.option("max_concurrency")
        return CalibrationClient(
            self.base_url,
            self.config["model"],
            token_ids=token_ids,
            max_concurrency=None if cap is None else int(cap),
        )

    def record_facts(self, live: bool) -> RecordFacts:
        version = str(self.config.get("version", "0.0.0+calibration"))
        return RecordFacts(version=version, server_config=dict(self.config))


def register_calibration() -> None:
    """Make ``kind = "calibration"`` available to suites (idempotent)."""
    from specperf.engines import register

    register(KIND, "tests.calibration.engine:CalibrationEngine")

"""Each vLLM start gets its own TMPDIR (vLLM's /tmp/vllm_dist_* rendezvous file lands there),
removed by the process clean-up when the server stops (specperf.engines.vllm.private_tmpdir)."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from specperf.engines.base import Devices, EngineSpec
from specperf.engines.vllm import VllmEngine, private_tmpdir


def test_private_tmpdir_and_its_removal() -> None:
    env, cleanup = private_tmpdir({"A": "1"}, {})
    own = Path(env["TMPDIR"])
    assert own.is_dir() and own.parent == Path(tempfile.gettempdir())
    assert own.name.startswith("specperf-vllm-") and env["A"] == "1"
    # torch's compile cache stays where it always is, so starts still share it
    assert Path(env["TORCHINDUCTOR_CACHE_DIR"]).parent == Path(tempfile.gettempdir())
    assert Path(env["TORCHINDUCTOR_CACHE_DIR"]).name.startswith("torchinductor_")
    (own / "vllm_dist_0123").write_text("")
    for cmd in cleanup:
        subprocess.run(cmd, check=True)
    assert not own.exists()


def test_an_engine_env_tmpdir_is_left_alone() -> None:
    env, cleanup = private_tmpdir({}, {"TMPDIR": "/scratch"})
    assert env == {} and cleanup == []


def test_launch_plan_carries_it(tmp_path: Path) -> None:
    spec = EngineSpec(
        kind="vllm",
        label="v",
        model="m",
        python="/usr/bin/python3",
        options=(("parser_check", False),),  # no vllm in that python
    )
    plan = VllmEngine(spec, Devices(), tmp_path).launch_plan(30123)
    own = Path(plan.env["TMPDIR"])
    assert list(plan.cleanup) == [["rm", "-rf", "--", str(own)]]
    for cmd in plan.cleanup:
        subprocess.run(cmd, check=True)

"""Container launch with a fake ``docker`` on PATH (no container engine runs here): the exact
``docker run`` command, readiness through the published port, and ``docker rm -f`` on stop, on
the owner's SIGKILL (watchdog) and in the sweep."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from specperf.engines import container
from specperf.engines.base import Devices, EngineSpec
from specperf.engines.process import group_members
from specperf.engines.vllm import VllmEngine
from specperf.errors import ConfigError

REPO = Path(__file__).resolve().parents[3]

FAKE_DOCKER = textwrap.dedent(
    """\
    import json, os, sys
    with open(os.environ["FAKE_DOCKER_LOG"], "a") as f:
        f.write(json.dumps(sys.argv[1:]) + "\\n")
    if sys.argv[1] == "run":
        from http.server import BaseHTTPRequestHandler, HTTPServer
        port = int(next(a for a in sys.argv if a.startswith("127.0.0.1:")).split(":")[1])
        class H(BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200); self.end_headers(); self.wfile.write(b"{}")
            def log_message(self, *a):
                pass
        HTTPServer(("127.0.0.1", port), H).serve_forever()
    """
)


@pytest.fixture
def fake_docker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "docker"
    script.write_text(f"#!{sys.executable}\n{FAKE_DOCKER}")
    script.chmod(0o755)
    log = tmp_path / "docker-calls.jsonl"
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_DOCKER_LOG", str(log))
    monkeypatch.setenv("SPECPERF_RUNTIME_DIR", str(tmp_path / "run"))
    monkeypatch.delenv("SPECPERF_DOCKER", raising=False)
    return log


def calls(log: Path) -> list[list[str]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def image_spec(model: str, **kw: object) -> EngineSpec:
    base: dict[str, object] = {
        "kind": "vllm",
        "label": "vllm-0.33.0-docker",
        "model": model,
        "image": "vllm/vllm-openai:v0.33.0",
        "method": "eagle3",
        "draft_model": model + "/eagle3",
        "num_speculative_tokens": 3,
    }
    return EngineSpec(**{**base, **kw})  # type: ignore[arg-type]


def test_docker_run_command_shape(fake_docker: Path, tmp_path: Path) -> None:
    model = tmp_path / "model"
    (model / "eagle3").mkdir(parents=True)
    s = image_spec(str(model), options=(("container_mounts", ("/data/hf:/root/.cache/hf",)),))
    cmd = container.docker_run_command(
        s,
        Devices(gpus=("0", "1")),
        8123,
        ["--model", str(model), "--port", "8123"],
        {"VLLM_SERVER_DEV_MODE": "1"},
        "specperf-x",
    )
    assert cmd[0] == str(tmp_path / "bin" / "docker")
    assert cmd[1:5] == ["run", "--rm", "--name", "specperf-x"]
    assert cmd[cmd.index("--gpus") + 1] == '"device=0,1"'
    assert cmd[cmd.index("-p") + 1] == "127.0.0.1:8123:8123"
    assert cmd[cmd.index("--ipc") + 1] == "host"
    assert cmd[cmd.index("-e") + 1] == "VLLM_SERVER_DEV_MODE=1"
    mounts = [cmd[i + 1] for i, a in enumerate(cmd) if a == "-v"]
    assert mounts == [
        f"{model}:{model}:ro",
        f"{model}/eagle3:{model}/eagle3:ro",
        "/data/hf:/root/.cache/hf",
    ]
    i = cmd.index("vllm/vllm-openai:v0.33.0")
    assert cmd[i + 1 :] == ["--model", str(model), "--port", "8123"]
    assert "-d" not in cmd  # foreground: logs and liveness come through the client


def test_missing_docker_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECPERF_DOCKER", "no-such-container-cli")
    with pytest.raises(ConfigError, match="not on PATH"):
        container.docker_binary()


def test_engine_with_image_starts_container_and_removes_it(
    fake_docker: Path, tmp_path: Path
) -> None:
    model = tmp_path / "model"
    (model / "eagle3").mkdir(parents=True)
    engine = VllmEngine(image_spec(str(model)), Devices(gpus=("3",)), tmp_path / "logs")
    engine.start(timeout_s=30)
    try:
        assert engine.is_alive()
        run = calls(fake_docker)[0]
        name = run[run.index("--name") + 1]
        assert name == f"specperf-vllm-{engine.spec.digest()}-{engine.port}"
        assert run[run.index("--gpus") + 1] == '"device=3"'
        inner = run[run.index("vllm/vllm-openai:v0.33.0") + 1 :]
        assert inner[inner.index("--host") + 1] == "0.0.0.0"
        assert inner[inner.index("--port") + 1] == str(engine.port)
        sc = json.loads(inner[inner.index("--speculative-config") + 1])
        assert sc == {"method": "eagle3", "model": f"{model}/eagle3", "num_speculative_tokens": 3}
        assert "VLLM_SERVER_DEV_MODE=1" in run
        assert not any(a.startswith(("CUDA_VISIBLE_DEVICES=", "LD_PRELOAD=")) for a in run)
    finally:
        engine.stop()
    assert calls(fake_docker)[-1] == ["rm", "-f", name]
    assert engine.server is not None and not group_members(engine.server.pgid)


OWNER = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from specperf.engines.base import Devices, EngineSpec
    from specperf.engines.vllm import VllmEngine
    spec = EngineSpec(kind="vllm", label="c", model=sys.argv[1], image="img:1")
    e = VllmEngine(spec, Devices(gpus=("0",)), Path(sys.argv[2]))
    e.start(30)
    print(json.dumps({"pgid": e.server.pgid}), flush=True)
    time.sleep(120)
    """
)


def test_owner_sigkill_still_removes_the_container(fake_docker: Path, tmp_path: Path) -> None:
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(tmp_path), str(tmp_path / "logs")],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        start_new_session=True,
    )
    assert owner.stdout is not None
    info = json.loads(owner.stdout.readline())
    try:
        owner.send_signal(signal.SIGKILL)
        owner.wait(timeout=10)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any(
            c[:2] == ["rm", "-f"] for c in calls(fake_docker)
        ):
            time.sleep(0.2)
        removed = [c for c in calls(fake_docker) if c[:2] == ["rm", "-f"]]
        assert len(removed) == 1 and removed[0][2].startswith("specperf-vllm-")
        assert not group_members(info["pgid"])
    finally:
        for p in group_members(info["pgid"]):
            p.kill()

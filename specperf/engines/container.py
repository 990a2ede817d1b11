"""Container launch for any server engine whose EngineSpec has ``image``.

The container runs in the FOREGROUND (``docker run --rm``, not ``-d``) under ``ServerProcess``:
its log streams into the engine log in the results dir, liveness is the docker client's
liveness, and the usual group teardown applies. Because killing the docker client does not stop a
container, ``docker rm -f <name>`` is registered as a cleanup command: run on stop, by the
watchdog when the owner is SIGKILLed, and by the pidfile sweep at the next start.

No container engine runs on the development machine: command building and teardown are tested
with a fake ``docker`` executable on PATH (docs/engines.md says so).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence

from specperf.engines.base import Devices, EngineSpec
from specperf.errors import ConfigError

NAME_PREFIX = "specperf-"


def docker_binary() -> str:
    """``SPECPERF_DOCKER`` (e.g. podman) or ``docker`` found on PATH."""
    name = os.environ.get("SPECPERF_DOCKER", "docker")
    found = shutil.which(name)
    if not found:
        raise ConfigError(
            f"engine image given but {name!r} is not on PATH (set SPECPERF_DOCKER to the "
            "container CLI, or drop `image` from the engine spec)"
        )
    return found


def container_name(spec: EngineSpec, port: int) -> str:
    """Unique per spec and port, so two workers never fight over one name."""
    return f"{NAME_PREFIX}{spec.kind}-{spec.digest()}-{port}"


def gpus_flag(devices: Devices) -> list[str]:
    """``--gpus '"device=0,1"'`` (the inner quotes are docker's syntax for a list)."""
    if not devices.gpus:
        return []
    return ["--gpus", f'"device={",".join(devices.gpus)}"']


def _mounts(paths: Sequence[str | None], extra: Sequence[str]) -> list[str]:
    """Read-only bind mounts, at the same path, for every local path the engine reads."""
    seen: list[str] = []
    for p in paths:
        if p and os.path.isabs(p) and os.path.exists(p) and p not in seen:
            seen.append(p)
    out: list[str] = []
    for p in seen:
        out += ["-v", f"{p}:{p}:ro"]
    for m in extra:
        out += ["-v", m]
    return out


def docker_run_command(
    spec: EngineSpec,
    devices: Devices,
    port: int,
    engine_args: Sequence[str],
    env: Mapping[str, str],
    name: str,
) -> list[str]:
    """The full ``docker run`` argv: the container publishes ``port`` on 127.0.0.1 only; the
    engine inside binds 0.0.0.0 on the same port (``engine_args`` carry that)."""
    if not spec.image:
        raise ConfigError(f"engine {spec.label!r}: no image to run")
    cmd = [docker_binary(), "run", "--rm", "--name", name, "--init"]
    cmd += gpus_flag(devices)
    cmd += ["-p", f"127.0.0.1:{port}:{port}", "--ipc", "host", "--shm-size", "16g"]
    if devices.cpus:
        cmd += ["--cpuset-cpus", ",".join(str(c) for c in devices.cpus)]
    for key, value in sorted(env.items()):
        cmd += ["-e", f"{key}={value}"]
    mounts = [spec.model, spec.tokenizer, spec.draft_model]
    extra = [str(m) for m in (spec.option("container_mounts") or ())]
    cmd += _mounts(mounts, extra)
    cmd += [str(a) for a in (spec.option("container_args") or ())]
    cmd.append(spec.image)
    cmd += [str(a) for a in engine_args]
    return cmd


def cleanup_commands(name: str) -> list[list[str]]:
    """What removes the container whatever happened to its docker client."""
    return [[docker_binary(), "rm", "-f", name]]


def container_env(base_env: Mapping[str, str]) -> dict[str, str]:
    """Variables passed into the container: the engine's own, minus host-only ones (the GPUs
    are given with --gpus, which renumbers them from 0 inside)."""
    return {k: v for k, v in base_env.items() if k not in {"CUDA_VISIBLE_DEVICES", "LD_PRELOAD"}}

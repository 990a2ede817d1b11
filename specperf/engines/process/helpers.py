"""Small helpers of a server start: a free port, waiting for HTTP 200, the device key, secrets
redacted from commands and environments, the tail of a log."""

from __future__ import annotations

import socket
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import httpx

from specperf.engines.base import Devices

LOG_TAIL_LINES = 40


_SECRET_FLAGS = ("--api-key", "--api_key", "--hf-token", "--token", "--admin-api-key")
_SECRET_ENV_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD")


# ---------------------------------------------------------------- small helpers


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS considers free on ``host`` right now (the engine binds it moments later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def wait_http_ok(
    url: str,
    timeout: float,
    *,
    alive: Callable[[], bool] | None = None,
    interval: float = 0.5,
    headers: Mapping[str, str] | None = None,
) -> bool:
    """Poll ``url`` until it answers 2xx (True) or ``timeout`` passes or ``alive()`` turns
    False (False). Connection errors count as "not yet"."""
    deadline = time.monotonic() + timeout
    with httpx.Client(
        timeout=min(5.0, max(interval, 1.0)), headers=dict(headers or {}), trust_env=False
    ) as client:
        while True:
            if alive is not None and not alive():
                return False
            try:
                if client.get(url).is_success:
                    return True
            except httpx.HTTPError:
                pass
            if time.monotonic() >= deadline:
                return False
            time.sleep(min(interval, max(0.0, deadline - time.monotonic())))


def device_key(devices: Devices) -> str:
    """Pidfile namespace of a device set: ``gpu-0-1``, ``cpu-0-1`` or ``cpu``."""
    if devices.gpus:
        return "gpu-" + "-".join(devices.gpus)
    if devices.cpus:
        return "cpu-" + "-".join(str(c) for c in devices.cpus)
    return "cpu"


def redact_command(command: Sequence[str]) -> list[str]:
    """The command with secret values replaced (``--api-key X`` and ``--api-key=X``)."""
    out: list[str] = []
    hide_next = False
    for arg in command:
        if hide_next:
            out.append("***")
            hide_next = False
        elif arg in _SECRET_FLAGS:
            out.append(arg)
            hide_next = True
        elif any(arg.startswith(f + "=") for f in _SECRET_FLAGS):
            out.append(arg.split("=", 1)[0] + "=***")
        else:
            out.append(arg)
    return out


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    return {
        k: ("***" if any(w in k.upper() for w in _SECRET_ENV_WORDS) else v) for k, v in env.items()
    }


def tail_lines(path: Path, n: int = LOG_TAIL_LINES) -> str:
    try:
        with open(path, errors="replace") as fh:
            return "".join(deque(fh, maxlen=n))
    except OSError:
        return ""

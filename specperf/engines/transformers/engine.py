"""The transformers engine: a Hugging Face model served by specperf's own server (``server``).

Why a child process and not an in-process model: the suite measures every engine the same way
(OpenAI streaming chat + counter deltas, design.md), a crash or a hung CUDA kernel cannot take
pytest down, and teardown is the shared process lifecycle (``ServerProcess``). The server counts
acceptance per verify step in-process and serves it at ``/specperf/counters``.

Methods: ``native`` (batched ``generate``), ``draft_model`` (transformers' assisted generation),
``ngram`` (prompt lookup) and ``eagle3`` (specperf's own EAGLE3, ``eagle3``). Speculative
methods run at batch size 1; ``check_workload`` raises ``UnsupportedError`` for concurrency > 1
so the suite can report a skip with that reason.

EngineSpec options (``spec.options``): device (auto|cpu|cuda), compile (auto|off), decode_loop
(off|auto|on: native greedy batch-1 requests without generate()'s per-token host work), cache
(auto|static|dynamic), random_weights / draft_random_weights (random weights from config.json,
for real model shapes without checkpoints), seed, threads, max_batch_size, probe_tokens,
phase_timing (EAGLE3's draft/verify seconds; on by default, CUDA events, no extra host sync).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, cast

import httpx

from specperf.engines import http_util
from specperf.engines.base import (
    Devices,
    EngineClient,
    EngineSpec,
    chunk_token_ids,
    normalize_url,
)
from specperf.engines.server_engine import LaunchPlan, RecordFacts, ServerEngine
from specperf.errors import ConfigError, UnsupportedError
from specperf.schemas import Counters

KIND = "transformers"
SERVER_MODULE = "specperf.engines.transformers.server"
ENGINE_NAME = "specperf-transformers"  # what /version answers (detection)
METHODS = ("native", "eagle3", "draft_model", "ngram")
SPECULATIVE = ("eagle3", "draft_model", "ngram")
TIMEOUT_S = 10.0
# served beside the acceptance counters: steps and EAGLE3's draft/verify seconds (per-step
# overhead), and the server's CUDA memory (raw values; deltas of these mean nothing)
EXTRA_COUNTERS = (
    "requests",
    "steps",
    "batches",
    "max_batch",
    "draft_time_s",
    "verify_time_s",
    "cuda_memory_allocated_bytes",
    "cuda_max_memory_allocated_bytes",
    "cuda_memory_reserved_bytes",
)


class TransformersClient(EngineClient):
    """Client of a running transformers engine server (started by us or found by ``detect``)."""

    kind = KIND

    def __init__(self, base_url: str, model: str, api_key: str | None = None) -> None:
        super().__init__(base_url, model, api_key)
        self._config: dict[str, Any] | None = None

    def _get(self, path: str) -> Any:
        resp = httpx.get(
            f"{self.base_url}{path}", headers=self.headers(), timeout=TIMEOUT_S, trust_env=False
        )
        resp.raise_for_status()
        return resp.json()

    def counters(self) -> Counters:
        c = self._get("/specperf/counters")
        per_pos = c.get("accepted_per_position")
        extra = [(k, float(c[k])) for k in EXTRA_COUNTERS if c.get(k) is not None]
        return Counters(
            drafts=c.get("drafts"),
            draft_tokens=c.get("draft_tokens"),
            accepted_tokens=c.get("accepted_tokens"),
            accepted_per_position=None if per_pos is None else tuple(float(x) for x in per_pos),
            generation_tokens=c.get("generation_tokens"),
            prompt_tokens=c.get("prompt_tokens"),
            extra=tuple(extra),
        )

    def reset_prefix_cache(self) -> bool:
        """transformers keeps no prefix cache between requests: nothing carries over."""
        return True

    def version(self) -> str | None:
        try:
            return str(self._get("/version").get("transformers"))
        except (httpx.HTTPError, ValueError):
            return None

    def server_config(self) -> dict[str, Any]:
        if self._config is None:
            self._config = dict(self._get("/specperf/config"))
        return self._config

    def is_alive(self) -> bool:
        return http_util.answers(
            lambda: httpx.get(f"{self.base_url}/health", timeout=TIMEOUT_S, trust_env=False)
        )

    def extract_token_ids(self, chunk: dict[str, Any]) -> list[int] | None:
        return chunk_token_ids(chunk)

    def check_workload(self, workload: Any) -> None:
        method = self.server_config().get("method")
        conc = int(getattr(workload, "concurrency", 1))
        if method in SPECULATIVE and conc > 1:
            raise UnsupportedError(
                f"transformers {method} runs at batch size 1; concurrency {conc} is not "
                "supported (transformers' assisted decoding and specperf's EAGLE3 are bs=1)"
            )

    def notes(self) -> list[str]:
        out = ["transformers engine: no prefix cache (reset is a no-op)"]
        try:
            cfg = self.server_config()
        except (httpx.HTTPError, ValueError):
            return out
        out.extend(str(n) for n in cfg.get("notes") or [])
        if cfg.get("method") == "ngram":
            out.append("transformers prompt lookup: matches n-grams up to ngram_max only")
        return out


def detect(url: str, model: str | None, api_key: str | None) -> TransformersClient | None:
    """``specperf bench --url``: our server answers /version with its engine name."""
    base = normalize_url(url)
    try:
        resp = httpx.get(f"{base}/version", timeout=TIMEOUT_S, trust_env=False)
        data = resp.json() if resp.is_success else {}
    except (httpx.HTTPError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("engine") != ENGINE_NAME:
        return None
    client = TransformersClient(base, model or "", api_key)
    if not model:
        client.model = str(client._get("/v1/models")["data"][0]["id"])
    return client


def _path(p: str) -> str:
    """Local paths may start with ~ (suite settings); anything else passes unchanged."""
    return str(Path(p).expanduser()) if p.startswith("~") else p


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        low = value.strip().lower()
        if low in ("on", "true", "1", "yes"):
            return True
        if low in ("off", "false", "0", "no"):
            return False
        raise ConfigError(f"transformers option phase_timing: expected on/off, got {value!r}")
    return bool(value)


def build_command(spec: EngineSpec, port: int, devices: Devices) -> list[str]:
    """argv of the engine server for ``spec`` (no secrets: the server takes none)."""
    if spec.method not in METHODS:
        raise ConfigError(
            f"engine {spec.label!r}: method {spec.method!r} is not supported by the "
            f"transformers engine (supported: {', '.join(METHODS)})"
        )
    if spec.method in SPECULATIVE and not spec.num_speculative_tokens:
        raise ConfigError(
            f"engine {spec.label!r}: method {spec.method} needs num_speculative_tokens"
        )
    if spec.method in ("eagle3", "draft_model") and not spec.draft_model:
        raise ConfigError(f"engine {spec.label!r}: method {spec.method} needs a draft/head path")
    cmd = [spec.python or sys.executable, "-m", SERVER_MODULE, "--model", _path(spec.model)]
    cmd += ["--host", str(spec.option("host", "127.0.0.1")), "--port", str(port)]
    cmd += ["--method", spec.method]
    if spec.served_model_name:
        cmd += ["--served-model-name", spec.served_model_name]
    if spec.tokenizer:
        cmd += ["--tokenizer", _path(spec.tokenizer)]
    if spec.num_speculative_tokens:
        cmd += ["--num-speculative-tokens", str(spec.num_speculative_tokens)]
    if spec.draft_model:
        cmd += ["--draft-model", _path(spec.draft_model)]
    if spec.ngram_max:
        cmd += ["--ngram-max", str(spec.ngram_max)]
    if spec.dtype:
        cmd += ["--dtype", spec.dtype]
    if spec.max_model_len:
        cmd += ["--max-model-len", str(spec.max_model_len)]
    if spec.max_num_seqs:
        cmd += ["--max-batch-size", str(spec.max_num_seqs)]
    for opt, flag in (
        ("device", "--device"),
        ("compile", "--compile"),
        ("decode_loop", "--decode-loop"),
        ("cache", "--cache"),
        ("seed", "--seed"),
        ("max_batch_size", "--max-batch-size"),
        ("probe_tokens", "--probe-tokens"),
    ):
        if spec.option(opt) is not None:
            cmd += [flag, str(spec.option(opt))]
    threads = spec.option("threads") or (len(devices.cpus) if devices.cpus else None)
    if threads:
        cmd += ["--threads", str(threads)]
    if spec.option("random_weights"):
        cmd.append("--random-weights")
    if spec.option("draft_random_weights"):
        cmd.append("--draft-random-weights")
    if spec.option("phase_timing") is not None:
        cmd += ["--phase-timing", "on" if _truthy(spec.option("phase_timing")) else "off"]
    return cmd + [str(a) for a in spec.extra_args]


class TransformersEngine(ServerEngine):
    """Starts one engine server for an EngineSpec of kind ``transformers``."""

    kind = KIND

    def launch_plan(self, port: int) -> LaunchPlan:
        env = {**dict(self.spec.env), **self.devices.env(), "TOKENIZERS_PARALLELISM": "false"}
        return LaunchPlan(build_command(self.spec, port, self.devices), env)

    def connect(self) -> TransformersClient:
        client = TransformersClient(self.base_url, self.model_name())
        client.server_config()
        return client

    def client(self) -> TransformersClient:
        return cast(TransformersClient, super().client())

    def record_facts(self, live: bool) -> RecordFacts:
        facts = RecordFacts()
        if live:
            try:
                cfg = self.client().server_config()
            except (httpx.HTTPError, ValueError) as exc:
                facts.notes.append(f"server config unavailable: {exc}")
            else:
                facts.server_config = cfg
                facts.version = cfg.get("versions", {}).get("transformers")
                facts.notes = list(cfg.get("notes") or [])
        return facts

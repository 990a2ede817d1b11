"""EngineSpec and the engine interfaces every engine module implements.

Two roles, kept apart so ``specperf bench --url`` can measure a server it did not start:

* ``EngineClient`` talks to a running engine: base URL, counters, prefix-cache reset, version,
  resolved server config. The workload runner only ever sees this.
* ``Engine`` owns a process (or an in-process model): start, readiness, liveness, teardown,
  and gives out its ``EngineClient``.

Everything engine-specific lives in ``specperf/engines/<kind>.py``; callers go through
``specperf.engines.get_engine_class(kind)`` / ``detect_client(url)``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specperf.errors import ConfigError
from specperf.schemas import NATIVE, Counters


def normalize_url(url: str) -> str:
    """The server root of an OpenAI-compatible URL: a trailing ``/`` and ``/v1`` removed, so
    ``--url http://h:8000/v1`` and ``--url http://h:8000`` name the same server."""
    url = url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


@dataclass(frozen=True)
class EngineSpec:
    """Everything that decides how an engine is started. Frozen and hashable: the engine pool
    keeps one running engine per spec and restarts only when the spec changes."""

    kind: str  # "vllm" | "sglang" | "transformers" | "calibration" | ...
    label: str  # human label, e.g. "vllm-0.32.0-cpu"; part of baseline keys
    model: str  # path or id of the target model
    served_model_name: str | None = None
    tokenizer: str | None = None
    # speculative method and topology
    method: str = NATIVE  # native|eagle3|eagle|mtp|ngram|draft_model|dflash|suffix
    num_speculative_tokens: int | None = None  # K (steps)
    topk: int | None = None
    num_draft_tokens: int | None = None
    draft_model: str | None = None
    ngram_min: int | None = None
    ngram_max: int | None = None
    # server shape
    dtype: str | None = None
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    gpu_memory_utilization: float | None = None
    tensor_parallel_size: int = 1
    enable_prefix_caching: bool | None = None
    enforce_eager: bool = False
    reasoning_parser: str | None = None
    extra_args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    # how it runs: the python of the engine's own venv, or a container image
    python: str | None = None
    image: str | None = None
    # free-form, engine-module-interpreted settings (e.g. calibration speeds); hashable pairs
    options: tuple[tuple[str, Any], ...] = ()

    @property
    def is_native(self) -> bool:
        return self.method == NATIVE

    def topology(self) -> dict[str, Any]:
        """What makes acceptance comparable (recorded in every summary and fingerprint)."""
        return {
            "method": self.method,
            "num_speculative_tokens": self.num_speculative_tokens,
            "topk": self.topk,
            "num_draft_tokens": self.num_draft_tokens,
            "draft_model": self.draft_model,
            "ngram_min": self.ngram_min,
            "ngram_max": self.ngram_max,
        }

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def digest(self) -> str:
        """Stable short hash of the whole spec (engine start logs and pidfiles use it)."""
        blob = json.dumps(self.to_dict(), sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:12]

    def option(self, key: str, default: Any = None) -> Any:
        return dict(self.options).get(key, default)


@dataclass
class Devices:
    """What an engine may use: GPU ids (CUDA_VISIBLE_DEVICES values) or, on CPU, a CPU set."""

    gpus: tuple[str, ...] = ()
    cpus: tuple[int, ...] = ()
    worker: str = "master"

    def env(self) -> dict[str, str]:
        return {"CUDA_VISIBLE_DEVICES": ",".join(self.gpus)} if self.gpus else {}


@dataclass
class EngineRecord:
    """The engine part of a run summary's ``environment`` (design.md, engine record)."""

    kind: str
    label: str
    version: str | None = None
    startup_s: float | None = None
    command: list[str] = field(default_factory=list)  # secrets redacted
    server_config: dict[str, Any] = field(default_factory=dict)
    pid: int | None = None
    log_path: str | None = None
    notes: list[str] = field(default_factory=list)
    # the `specperf env` the engine ran from (release, torch build, versions); None otherwise
    env: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def chunk_token_ids(chunk: dict[str, Any]) -> list[int] | None:
    """``choices[0].token_ids`` of a streamed chat chunk (vLLM's ``return_token_ids``, the
    transformers server), None when the chunk carries none."""
    choices = chunk.get("choices") or []
    if not choices or not isinstance(choices[0], dict):
        return None
    ids = choices[0].get("token_ids")
    return [int(i) for i in ids] if isinstance(ids, list) else None


class EngineClient(ABC):
    """A running, OpenAI-compatible engine as seen by the workload runner."""

    kind: str = "unknown"

    def __init__(self, base_url: str, model: str, api_key: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")  # e.g. http://127.0.0.1:8123 (no /v1)
        self.model = model
        self.api_key = api_key

    @property
    def chat_url(self) -> str:
        return f"{self.base_url}/v1/chat/completions"

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    @abstractmethod
    def counters(self) -> Counters:
        """Snapshot of cumulative counters (all-None fields where the engine has none)."""

    def reset_prefix_cache(self) -> bool:
        """Flush the prefix cache; False when the engine has no endpoint for it."""
        return False

    def version(self) -> str | None:
        return None

    def server_config(self) -> dict[str, Any]:
        return {}

    def is_alive(self) -> bool:
        return True

    def adapt_request(self, body: dict[str, Any]) -> dict[str, Any]:
        """Engine-specific request fields (e.g. asking for token ids); default unchanged."""
        return body

    def extract_token_ids(self, chunk: dict[str, Any]) -> list[int] | None:
        """Token ids carried by one streamed chunk, where the engine returns them."""
        return None

    def observe_chunk(self, chunk: dict[str, Any]) -> None:
        """Sees every parsed streamed chunk, ``choices: []`` ones included (SGLang sends its
        per-request ``sglext.spec_tokens_details`` there); default: nothing."""
        return None

    def notes(self) -> list[str]:
        """Caveats to put in the summary's ``notes`` (e.g. acceptance not exposed)."""
        return []

    def check_workload(self, workload: Any) -> None:
        """Raise ``specperf.errors.UnsupportedError`` when this engine cannot run ``workload``
        (a WorkloadSpec) as asked, e.g. concurrency > 1 on a batch-size-1 path; default: all."""
        return None


class Engine(ABC):
    """An engine this process starts and owns; one per EngineSpec per worker."""

    def __init__(self, spec: EngineSpec, devices: Devices, log_dir: Path) -> None:
        self.spec = spec
        self.devices = devices
        self.log_dir = Path(log_dir)

    @abstractmethod
    def start(self, timeout_s: float) -> None:
        """Start and wait until ready; raise EngineStartError with the log tail on failure."""

    @abstractmethod
    def stop(self) -> None:
        """Stop everything the engine started (idempotent)."""

    @abstractmethod
    def client(self) -> EngineClient: ...

    @abstractmethod
    def is_alive(self) -> bool: ...

    @abstractmethod
    def record(self) -> EngineRecord: ...

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ---------------------------------------------------------------- command-line helpers
def value_flags(spec: EngineSpec, table: Sequence[tuple[str, str]]) -> list[str]:
    """``[flag, value, ...]`` for each (EngineSpec field, engine flag) in ``table`` whose value
    is set; each engine module keeps its own table of names."""
    out: list[str] = []
    for name, flag in table:
        value = getattr(spec, name)
        if value is not None and value != "":
            out += [flag, str(value)]
    return out


def reject_extra_args(
    spec: EngineSpec, forbidden: Iterable[str], why: str, owned: Iterable[str], use: str
) -> None:
    """One-line ConfigError for an ``extra_args`` flag that breaks the measurement (``why``)
    or that specperf sets itself (``use``: the engine fields to set instead)."""
    forbidden, owned = set(forbidden), set(owned)
    for arg in spec.extra_args:
        flag = str(arg).split("=", 1)[0]
        if flag in forbidden:
            raise ConfigError(
                f"engine {spec.label!r}: extra_args contains {flag}, which {why}; drop it"
            )
        if flag in owned:
            raise ConfigError(
                f"engine {spec.label!r}: extra_args contains {flag}, which specperf sets itself "
                f"(use the engine fields {use} instead)"
            )

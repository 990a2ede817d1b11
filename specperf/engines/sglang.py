"""SGLang as a server engine: version-aware command building, readiness through
``/health_generate``, acceptance from SGLang's own counters, and the ``sglang`` env recipe.

The suite never imports sglang: the server runs with the python of its own environment
(``spec.python``, e.g. from ``specperf env create sglang==0.5.23``) or in a container image.
Facts used here are in shared/reference/sglang.md and were checked against the release wheels
(cited per constant below). SGLang cannot be served on this project's CPUs; everything here is
tested against SGLang's own argument parser and source, and against a stand-in server
(tests/sglang_standin) that emits what that source defines.

Acceptance mapping (design.md: MAL = 1 + Δaccepted/Δdrafts, tokens per verify step, bonus
included). SGLang counts, per finished request, ``completion_tokens`` (``generation_tokens``) and
``spec_verify_ct`` (one per verify step; the first token comes from prefill and is NOT a verify
step: ``batch_result_processor.py::_resolve_spec_v2_tokens`` in 0.5.23,
``speculative/eagle_utils.py`` in 0.5.2). So, over the run:

* drafts   = Δspec_verify_calls
* accepted = Δgeneration_tokens − Δspec_verify_calls − Δnum_requests   (one prefill token each)
* MAL      = 1 + accepted/drafts = (Δgen − Δrequests)/Δverify; SGLang's own
  ``completion_tokens/spec_verify_ct`` includes the prefill token and overstates MAL on short
  outputs — normalised here.
* draft_tokens = Δverify × depth (depth = drafted positions per step: K for EAGLE-family trees,
  num_draft_tokens for chains), so ``acceptance_rate`` is the chain-comparable share of drafted
  positions; SGLang's own rate divides by the whole tree (``num_draft_tokens`` per step): its
  denominator is in ``extra`` (``sglang_proposed_draft_tokens``) and is not comparable across
  engines when topk > 1.

``EngineSpec.num_draft_tokens`` follows the suite's convention (draft tokens verified per step,
the root/bonus token excluded; equal to K for a chain); SGLang's
``--speculative-num-draft-tokens`` counts the root too, so the flag gets ``num_draft_tokens + 1``.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import httpx
from packaging.version import InvalidVersion, Version

from specperf.engines import container
from specperf.engines.base import (
    NATIVE,
    Devices,
    EngineClient,
    EngineSpec,
    reject_extra_args,
    value_flags,
)
from specperf.engines.server_engine import LaunchPlan, RecordFacts, ServerEngine
from specperf.errors import ConfigError, EngineStartError
from specperf.schemas import Counters

KIND = "sglang"
LAUNCH_MODULE = "sglang.launch_server"
HTTP_TIMEOUT_S = 10.0
HEALTH_PATH = "/health_generate"  # runs one token on every version (sglang.md §1.4)

# specperf method -> SGLang --speculative-algorithm (NEXTN is SGLang's MTP, an alias of EAGLE)
ALGORITHMS: dict[str, str] = {
    "eagle": "EAGLE",
    "eagle3": "EAGLE3",
    "mtp": "NEXTN",
    "draft_model": "STANDALONE",
    "ngram": "NGRAM",
    "dflash": "DFLASH",
}
# First release whose parser / SpeculativeAlgorithm enum knows the algorithm, read from the
# wheels (srt/server_args.py choices, srt/speculative/spec_info.py): 0.5.1 has EAGLE, EAGLE3,
# NEXTN; 0.5.2 adds STANDALONE; 0.5.3 NGRAM; 0.5.10 has no DFLASH, 0.5.11 does. 0.4.10 (the
# oldest release the reference checked) has EAGLE, EAGLE3, NEXTN.
ALGORITHM_SINCE: dict[str, str] = {
    "EAGLE": "0.4.10",
    "EAGLE3": "0.4.10",
    "NEXTN": "0.4.10",
    "STANDALONE": "0.5.2",
    "NGRAM": "0.5.3",
    "DFLASH": "0.5.11",
}
OLDEST_KNOWN = Version("0.4.10")
# `sglang serve` (console script sglang.cli.main:main): absent in 0.5.3, present in 0.5.5
SERVE_CLI_SINCE = Version("0.5.5")
# sglang:spec_verify_calls_total (observability/metrics_collector.py): absent 0.5.12, present 0.5.13
VERIFY_COUNTER_SINCE = Version("0.5.13")
# OpenAI-API `return_spec_tokens_details` / sglext.spec_tokens_details (entrypoints/openai/
# protocol.py): absent in 0.5.16, present in 0.5.19; 0.5.17/0.5.18 not checked, so not used there
SPEC_DETAILS_SINCE = Version("0.5.19")

# flags specperf sets itself (the spec's fields); repeating them in extra_args would override
OWNED_FLAGS = (
    "--model-path",
    "--model",
    "--host",
    "--port",
    "--speculative-algorithm",
    "--speculative-draft-model-path",
    "--speculative-draft-model",
    "--speculative-num-steps",
    "--speculative-eagle-topk",
    "--speculative-num-draft-tokens",
    "--speculative-dflash-block-size",
    "--speculative-ngram-max-bfs-breadth",
)
# makes steps (and so the reported accept length) time-varying: not a regression baseline
FORBIDDEN_FLAGS = ("--speculative-adaptive",)

# Prometheus sample names (SGLang's TokenizerMetricsCollector, 0.5.2 .. 0.5.23)
_GEN = "sglang:generation_tokens_total"
_PROMPT = "sglang:prompt_tokens_total"
_REQUESTS = "sglang:num_requests_total"
_CACHED = "sglang:cached_tokens_total"
_VERIFY = "sglang:spec_verify_calls_total"
_VERSION_RE = re.compile(r"(\d+\.\d+\.\d+(?:\.post\d+)?)")


# ---------------------------------------------------------------- versions


def parse_version(text: str | None) -> Version | None:
    if not text:
        return None
    m = _VERSION_RE.search(str(text))
    if not m:
        return None
    try:
        return Version(m.group(1))
    except InvalidVersion:
        return None


@functools.lru_cache(maxsize=16)
def installed_version(python: str) -> str | None:
    """The sglang version installed for ``python`` (metadata only: sglang is not imported)."""
    code = "import importlib.metadata as m; print(m.version('sglang'))"
    try:
        out = subprocess.run(
            [python, "-c", code], capture_output=True, text=True, timeout=60, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def spec_version(spec: EngineSpec) -> Version | None:
    """The SGLang version a spec runs: ``options.sglang_version``, else the env's installed
    package, else the image tag (``lmsysorg/sglang:v0.5.23-cu129``)."""
    declared = spec.option("sglang_version")
    if declared:
        v = parse_version(str(declared))
        if v is None:
            raise ConfigError(
                f"engine {spec.label!r}: options.sglang_version {declared!r} is not X.Y.Z"
            )
        return v
    if spec.image:
        return parse_version(spec.image.rpartition(":")[2])
    return parse_version(installed_version(spec.python or sys.executable))


def check_supported(spec: EngineSpec, version: Version | None) -> None:
    """Fail fast when the method is not one SGLang runs or the installed version lacks it."""
    where = f"engine {spec.label!r}"
    if spec.method == NATIVE:
        return
    algo = ALGORITHMS.get(spec.method)
    if algo is None:
        raise ConfigError(
            f"{where}: method {spec.method!r} is not one SGLang runs "
            f"({', '.join([NATIVE, *ALGORITHMS])})"
        )
    if version is None:
        raise ConfigError(
            f"{where}: cannot tell which SGLang version runs (no sglang package for "
            f"{spec.python or sys.executable}{', image ' + spec.image if spec.image else ''}); "
            "set options.sglang_version"
        )
    since = Version(ALGORITHM_SINCE[algo])
    if version < since:
        raise ConfigError(
            f"{where}: SGLang {version} does not support method {spec.method} "
            f"(--speculative-algorithm {algo} exists from SGLang {since})"
        )


# ---------------------------------------------------------------- command building


@dataclass(frozen=True)
class Topology:
    """What the command pins: SGLang's own numbers (its num_draft_tokens includes the root)."""

    algorithm: str
    num_steps: int
    topk: int
    num_draft_tokens: int  # SGLang's --speculative-num-draft-tokens (root included)

    @property
    def depth(self) -> int:
        """Drafted positions per verify step (the chain-comparable rate denominator)."""
        return self.num_draft_tokens - 1 if self.topk == 1 else self.num_steps

    @property
    def tree_size(self) -> int:
        """Draft tokens verified per step, root excluded (SGLang's rate denominator)."""
        return self.num_draft_tokens - 1


def topology(spec: EngineSpec) -> Topology | None:
    """SGLang's (algorithm, steps, topk, draft tokens) for ``spec``, every value explicit."""
    if spec.method == NATIVE:
        return None
    where = f"engine {spec.label!r}"
    algo = ALGORITHMS.get(spec.method)
    if algo is None:
        raise ConfigError(
            f"{where}: method {spec.method!r} is not one SGLang runs "
            f"({', '.join([NATIVE, *ALGORITHMS])})"
        )
    k = spec.num_speculative_tokens
    if k is None or k < 1:
        raise ConfigError(f"{where}: method {spec.method} needs num_speculative_tokens (K) ≥ 1")
    topk = 1 if spec.topk is None else spec.topk
    if topk < 1:
        raise ConfigError(f"{where}: topk must be ≥ 1, got {topk}")
    if spec.ngram_min is not None or spec.ngram_max is not None:
        raise ConfigError(
            f"{where}: SGLang has no n-gram match-window setting since 0.5.10 (ngram_min/"
            "ngram_max are vLLM's prompt_lookup_min/max); unset them for SGLang rows or pass "
            "--speculative-ngram-* flags in extra_args"
        )
    if algo in ("EAGLE", "EAGLE3", "STANDALONE", "DFLASH") and not spec.draft_model:
        raise ConfigError(f"{where}: method {spec.method} needs draft_model (the draft/head path)")
    drafts = spec.num_draft_tokens
    if algo == "DFLASH":
        # one block of K drafts verified at once; SGLang forces steps = topk = 1
        if topk != 1:
            raise ConfigError(f"{where}: DFLASH drafts one block: topk must be 1, got {topk}")
        if drafts is not None and drafts != k:
            raise ConfigError(
                f"{where}: DFLASH verifies its K drafts in one block, so num_draft_tokens "
                f"({drafts}) must equal num_speculative_tokens ({k})"
            )
        return Topology(algo, 1, 1, k + 1)
    if algo == "NGRAM":
        if topk == 1 and drafts is not None and drafts != k:
            raise ConfigError(
                f"{where}: an n-gram chain (topk 1) drafts K tokens, so num_draft_tokens "
                f"({drafts}) must equal num_speculative_tokens ({k})"
            )
        if topk > 1 and drafts is None:
            raise ConfigError(f"{where}: NGRAM with topk {topk} needs num_draft_tokens explicit")
        return Topology(algo, k, topk, (drafts if drafts is not None else k) + 1)
    # EAGLE family and STANDALONE: K steps, topk branches per step, a tree of draft tokens
    if topk == 1:
        if drafts is not None and drafts != k:
            raise ConfigError(
                f"{where}: a chain (topk 1) drafts K tokens per step, so num_draft_tokens "
                f"({drafts}) must equal num_speculative_tokens ({k}); SGLang's "
                "--speculative-num-draft-tokens (K+1, root included) is derived from it"
            )
        return Topology(algo, k, 1, k + 1)
    if drafts is None:
        raise ConfigError(
            f"{where}: a tree (topk {topk}) needs num_draft_tokens explicit (draft tokens "
            "verified per step, root excluded); SGLang would otherwise pick it per version"
        )
    if drafts > k * topk:
        raise ConfigError(
            f"{where}: num_draft_tokens ({drafts}) exceeds steps × topk ({k} × {topk})"
        )
    return Topology(algo, k, topk, drafts + 1)


def speculative_args(spec: EngineSpec) -> list[str]:
    """The ``--speculative-*`` flags for ``spec`` (empty for native)."""
    topo = topology(spec)
    if topo is None:
        return []
    args = ["--speculative-algorithm", topo.algorithm]
    if spec.draft_model:
        args += ["--speculative-draft-model-path", spec.draft_model]
    args += [
        "--speculative-num-steps",
        str(topo.num_steps),
        "--speculative-eagle-topk",
        str(topo.topk),
        "--speculative-num-draft-tokens",
        str(topo.num_draft_tokens),
    ]
    if topo.algorithm == "NGRAM":
        # SGLang forces topk to the BFS breadth: pin it to the same value
        args += ["--speculative-ngram-max-bfs-breadth", str(topo.topk)]
        args += ["--speculative-ngram-min-bfs-breadth", "1"]
    return args


def check_extra_args(spec: EngineSpec) -> None:
    reject_extra_args(
        spec,
        FORBIDDEN_FLAGS,
        "makes the number of draft steps (and the accept length) change during a run",
        OWNED_FLAGS,
        "model / method / draft_model / topology",
    )


# EngineSpec field -> server flag, passed when set
VALUE_FLAGS = (
    ("tokenizer", "--tokenizer-path"),
    ("dtype", "--dtype"),
    ("max_model_len", "--context-length"),
    ("max_num_seqs", "--max-running-requests"),
    ("max_num_batched_tokens", "--chunked-prefill-size"),
    ("gpu_memory_utilization", "--mem-fraction-static"),
    ("tensor_parallel_size", "--tp-size"),
    ("reasoning_parser", "--reasoning-parser"),
)


def server_args(spec: EngineSpec, host: str, port: int) -> list[str]:
    """The server arguments (everything after ``sglang serve`` / ``-m sglang.launch_server``)."""
    check_extra_args(spec)
    args = ["--model-path", spec.model, "--host", host, "--port", str(port)]
    args += ["--served-model-name", spec.served_model_name or spec.model]
    args += value_flags(spec, VALUE_FLAGS)
    if spec.enable_prefix_caching is False:
        args.append("--disable-radix-cache")
    if spec.enforce_eager:
        args.append("--disable-cuda-graph")
    if spec.option("device"):
        args += ["--device", str(spec.option("device"))]
    args.append("--enable-metrics")
    args += speculative_args(spec)
    args += [str(a) for a in spec.extra_args]
    return args


def launcher(spec: EngineSpec, version: Version | None) -> list[str]:
    """``<env>/bin/sglang serve`` where the version has it, else ``python -m
    sglang.launch_server`` (still accepted by 0.5.23, with a deprecation warning)."""
    python = spec.python or sys.executable
    if version is not None and version >= SERVE_CLI_SINCE:
        script = Path(python).parent / "sglang"
        if script.exists():
            return [str(script), "serve"]
    return [python, "-m", LAUNCH_MODULE]


def build_command(
    spec: EngineSpec, port: int, host: str = "127.0.0.1", version: Version | None = None
) -> list[str]:
    return [*launcher(spec, version), *server_args(spec, host, port)]


def server_env(spec: EngineSpec, devices: Devices) -> dict[str, str]:
    """GPUs for the server; ``spec.env`` wins."""
    env = {**devices.env()}
    env.update(dict(spec.env))
    return env


# ---------------------------------------------------------------- counters


@dataclass(frozen=True)
class MetricTotals:
    """Raw SGLang Prometheus totals, summed over every label set (None: series absent)."""

    generation_tokens: float | None = None
    prompt_tokens: float | None = None
    num_requests: float | None = None
    cached_tokens: float | None = None
    verify_calls: float | None = None


def parse_metric_totals(text: str, *, with_verify: bool = False) -> MetricTotals:
    """``/metrics`` text → totals (``_total`` samples only; ``_created`` skipped). A series
    with no sample yet counts 0: SGLang's labelled counters appear with their first finished
    request. ``with_verify``: the server's version has the verify counter, so its absence
    means 0 too (otherwise it stays None: the version lacks it)."""
    from prometheus_client.parser import text_string_to_metric_families

    sums: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in (_GEN, _PROMPT, _REQUESTS, _CACHED, _VERIFY):
                sums[sample.name] = sums.get(sample.name, 0.0) + float(sample.value)
    return MetricTotals(
        generation_tokens=sums.get(_GEN, 0.0),
        prompt_tokens=sums.get(_PROMPT, 0.0),
        num_requests=sums.get(_REQUESTS, 0.0),
        cached_tokens=sums.get(_CACHED, 0.0),
        verify_calls=sums.get(_VERIFY, 0.0 if with_verify else None),
    )


def counters_from_totals(totals: MetricTotals, topo: Topology | None) -> Counters:
    """Map SGLang's cumulative totals onto the Counters contract (see the module docstring).
    Deltas of these give MAL = (Δgen − Δrequests)/Δverify."""
    drafts = accepted = draft_tokens = None
    extra: list[tuple[str, float]] = []
    gen, reqs, verify = totals.generation_tokens, totals.num_requests, totals.verify_calls
    if verify is not None and gen is not None and reqs is not None:
        drafts = verify
        accepted = gen - verify - reqs
        extra.append(("spec_verify_calls", verify))
        if topo is not None:
            draft_tokens = verify * topo.depth
            extra.append(("sglang_proposed_draft_tokens", verify * topo.tree_size))
    if reqs is not None:
        extra.append(("num_requests", reqs))
    return Counters(
        drafts=drafts,
        draft_tokens=draft_tokens,
        accepted_tokens=accepted,
        generation_tokens=gen,
        prompt_tokens=totals.prompt_tokens,
        prefix_cache_queries=totals.prompt_tokens,
        prefix_cache_hits=totals.cached_tokens,
        extra=tuple(sorted(extra)),
    )


@dataclass
class PerRequestTotals:
    """Running sums of SGLang's per-request ``spec_tokens_details`` (the fallback when the
    server has no verify counter, e.g. started without --enable-metrics)."""

    requests: int = 0
    verify_ct: int = 0
    correct_drafts: int = 0
    proposed_drafts: int = 0
    per_position: tuple[int, ...] = ()

    def add(self, details: Mapping[str, Any]) -> None:
        verify = int(details.get("spec_verify_ct") or 0)
        self.requests += 1
        self.verify_ct += verify
        self.correct_drafts += int(details.get("spec_num_correct_drafts") or 0)
        self.proposed_drafts += int(details.get("spec_num_proposed_drafts") or 0)
        hist = [int(x) for x in details.get("spec_correct_drafts_histogram") or []]
        # hist[k] = verify steps that accepted k drafts → position i accepted in Σ_{k>i} hist[k]
        at_least = [sum(hist[i + 1 :]) for i in range(max(0, len(hist) - 1))]
        n = max(len(self.per_position), len(at_least))
        a = list(self.per_position) + [0] * (n - len(self.per_position))
        b = at_least + [0] * (n - len(at_least))
        self.per_position = tuple(x + y for x, y in zip(a, b, strict=True))

    def counters(self, topo: Topology | None, totals: MetricTotals) -> Counters:
        depth = topo.depth if topo is not None else None
        return Counters(
            drafts=float(self.verify_ct),
            draft_tokens=float(self.verify_ct * depth) if depth is not None else None,
            accepted_tokens=float(self.correct_drafts),
            accepted_per_position=tuple(float(x) for x in self.per_position),
            generation_tokens=totals.generation_tokens,
            prompt_tokens=totals.prompt_tokens,
            prefix_cache_queries=totals.prompt_tokens,
            prefix_cache_hits=totals.cached_tokens,
            extra=(
                ("per_request_spec_details", float(self.requests)),
                ("sglang_proposed_draft_tokens", float(self.proposed_drafts)),
                ("spec_verify_calls", float(self.verify_ct)),
            ),
        )


def spec_details_of(chunk: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """``sglext.spec_tokens_details`` of a streamed chunk (a dict, or a list when n > 1)."""
    ext = chunk.get("sglext")
    if not isinstance(ext, Mapping):
        return []
    details = ext.get("spec_tokens_details")
    if isinstance(details, Mapping):
        return [details]
    if isinstance(details, list):
        return [d for d in details if isinstance(d, Mapping)]
    return []


def topology_from_info(info: Mapping[str, Any]) -> Topology | None:
    """The resolved topology in ``/server_info`` (None for native servers)."""
    algo = info.get("speculative_algorithm")
    if not algo:
        return None
    try:
        return Topology(
            str(algo).upper(),
            int(info["speculative_num_steps"]),
            int(info["speculative_eagle_topk"]),
            int(info["speculative_num_draft_tokens"]),
        )
    except (KeyError, TypeError, ValueError):
        return None


_CONFIG_KEYS = (
    "model_path",
    "served_model_name",
    "tokenizer_path",
    "dtype",
    "context_length",
    "max_running_requests",
    "chunked_prefill_size",
    "max_prefill_tokens",
    "mem_fraction_static",
    "tp_size",
    "dp_size",
    "disable_radix_cache",
    "disable_cuda_graph",
    "cuda_graph_max_bs",
    "attention_backend",
    "sampling_backend",
    "page_size",
    "disable_overlap_schedule",
    "enable_metrics",
    "decode_log_interval",
    "reasoning_parser",
    "device",
    "max_total_num_tokens",
    "version",
    "launch_command",
)


def summarize_server_info(info: Mapping[str, Any]) -> dict[str, Any]:
    """The resolved settings that decide performance, from ``/server_info``."""
    out: dict[str, Any] = {k: info[k] for k in _CONFIG_KEYS if k in info}
    out["speculative"] = {k: v for k, v in info.items() if k.startswith("speculative_")}
    states = info.get("internal_states")
    if isinstance(states, list):
        out["internal_states"] = [
            {k: v for k, v in s.items() if not isinstance(v, (dict, list))}
            for s in states
            if isinstance(s, Mapping)
        ]
    return out


# ---------------------------------------------------------------- client


class SglangClient(EngineClient):
    """A running SGLang server (started by SglangEngine or found by ``detect``)."""

    kind = KIND

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        info: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(base_url, model, api_key)
        self._info: dict[str, Any] | None = dict(info) if info is not None else None
        self._lock = threading.Lock()
        self._per_request = PerRequestTotals()
        self._mode: str | None = None  # "counters" | "per_request" | "none"
        self._has_metrics: bool | None = None

    # -- HTTP

    def _get(self, path: str, timeout: float = HTTP_TIMEOUT_S) -> httpx.Response:
        return httpx.get(
            f"{self.base_url}{path}", headers=self.headers(), timeout=timeout, trust_env=False
        )

    def server_info(self, refresh: bool = False) -> dict[str, Any] | None:
        """``/server_info``, falling back to ``/get_server_info`` (the only name before 0.5.10
        and a deprecated alias since)."""
        if self._info is not None and not refresh:
            return self._info
        for path in ("/server_info", "/get_server_info"):
            try:
                resp = self._get(path)
            except httpx.HTTPError:
                return self._info
            if resp.status_code == 200:
                try:
                    data = resp.json()
                except ValueError:
                    continue
                if isinstance(data, dict):
                    self._info = data
                    return data
        return self._info

    @property
    def topology(self) -> Topology | None:
        info = self.server_info()
        return topology_from_info(info) if info else None

    def version(self) -> str | None:
        info = self.server_info()
        return str(info["version"]) if info and info.get("version") else None

    def _version(self) -> Version | None:
        return parse_version(self.version())

    def server_config(self) -> dict[str, Any]:
        info = self.server_info()
        return summarize_server_info(info) if info else {}

    def metric_totals(self) -> MetricTotals | None:
        """None when the server exposes no /metrics (started without --enable-metrics)."""
        try:
            resp = self._get("/metrics")
        except httpx.HTTPError:
            return None
        if resp.status_code != 200:
            return None
        version = self._version()
        has_verify = version is not None and version >= VERIFY_COUNTER_SINCE
        return parse_metric_totals(resp.text, with_verify=has_verify)

    # -- acceptance

    def _choose_mode(self, totals: MetricTotals | None) -> str:
        if self.topology is None:
            return "none"  # native server: nothing to count
        if totals is not None and totals.verify_calls is not None:
            return "counters"
        version = self._version()
        if version is not None and version >= SPEC_DETAILS_SINCE:
            return "per_request"
        return "none"

    def counters(self) -> Counters:
        totals = self.metric_totals()
        self._has_metrics = totals is not None
        mode = self._choose_mode(totals)
        # first answer wins: a run's before/after snapshots must come from the same source
        with self._lock:
            if self._mode is None or (self._mode == "none" and mode != "none"):
                self._mode = mode
            mode = self._mode
        totals = totals or MetricTotals()
        if mode == "counters":
            return counters_from_totals(totals, self.topology)
        if mode == "per_request":
            with self._lock:
                return self._per_request.counters(self.topology, totals)
        return counters_from_totals(
            MetricTotals(
                generation_tokens=totals.generation_tokens,
                prompt_tokens=totals.prompt_tokens,
                num_requests=totals.num_requests,
                cached_tokens=totals.cached_tokens,
            ),
            None,
        )

    def adapt_request(self, body: dict[str, Any]) -> dict[str, Any]:
        """Ask for per-request spec details only where they are the acceptance source."""
        if self._mode == "per_request":
            return {**body, "return_spec_tokens_details": True}
        return body

    def observe_chunk(self, chunk: dict[str, Any]) -> None:
        """Every streamed chunk (SGLang sends ``sglext`` in a chunk with ``choices: []``)."""
        details = spec_details_of(chunk)
        if not details:
            return
        with self._lock:
            for d in details:
                self._per_request.add(d)

    def reset_prefix_cache(self) -> bool:
        """``POST /flush_cache``: empties the radix cache (and SGLang's internal accept-length
        average); refused (400) while requests are running."""
        try:
            resp = httpx.post(
                f"{self.base_url}/flush_cache",
                headers=self.headers(),
                timeout=HTTP_TIMEOUT_S,
                trust_env=False,
            )
        except httpx.HTTPError:
            return False
        return resp.status_code == 200

    def is_alive(self) -> bool:
        """False only when nothing answers; ``/v1/models`` does not run a generation."""
        try:
            self._get("/v1/models")
        except httpx.TimeoutException:
            return True
        except httpx.TransportError:
            return False
        return True

    def notes(self) -> list[str]:
        out: list[str] = []
        topo = self.topology
        if topo is None:
            return out
        if self._mode == "counters":
            out.append(
                "SGLang acceptance from Prometheus deltas: drafts = Δspec_verify_calls, accepted "
                "= Δgeneration_tokens − Δverify − Δnum_requests (the prefill token is not a "
                "verify step), MAL = 1 + accepted/drafts"
            )
        elif self._mode == "per_request":
            out.append(
                "SGLang acceptance from per-request sglext.spec_tokens_details (no "
                "sglang:spec_verify_calls_total on this server): drafts = Σspec_verify_ct, "
                "accepted = Σspec_num_correct_drafts"
            )
        else:
            info = self.server_info(refresh=True) or {}
            avg = [
                s.get("avg_spec_accept_length")
                for s in info.get("internal_states") or []
                if isinstance(s, Mapping)
            ]
            version = self._version()
            if self._has_metrics is False and version and version >= VERIFY_COUNTER_SINCE:
                why = "exposes no /metrics (start it with --enable-metrics)"
            else:
                why = (
                    f"has no verify counter (sglang:spec_verify_calls_total, from "
                    f"{VERIFY_COUNTER_SINCE})"
                )
            out.append(
                f"SGLang {self.version() or '?'} {why} and no per-request spec details in its "
                f"OpenAI API (from {SPEC_DETAILS_SINCE}): acceptance not measured"
                + (
                    f"; its own interval-folded avg_spec_accept_length since the last flush: "
                    f"{avg} (not a counter delta, not used)"
                    if any(a is not None for a in avg)
                    else ""
                )
            )
        if topo.topk > 1:
            out.append(
                f"acceptance_rate divides by drafted depth ({topo.depth} per step); SGLang's own "
                f"rate divides by the tree ({topo.tree_size} draft tokens per step, counters."
                "extra.sglang_proposed_draft_tokens): tree rates are not comparable across engines"
            )
        return out


def _normalize_url(url: str) -> str:
    url = url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def detect(url: str, model: str | None, api_key: str | None) -> SglangClient | None:
    """An SglangClient when ``url`` is an SGLang server: ``/server_info`` (or, before 0.5.10,
    ``/get_server_info``) answers with SGLang's server args. None otherwise."""
    base = _normalize_url(url)
    client = SglangClient(base, model or "", api_key)
    info = client.server_info()
    if not info or "model_path" not in info or "vllm_config" in info:
        return None
    if not any(k.startswith("speculative_") for k in info):
        return None
    if model is None:
        served = info.get("served_model_name") or info.get("model_path")
        try:
            resp = client._get("/v1/models")
            data = resp.json().get("data") or []
            served = str(data[0]["id"]) if data else served
        except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError, IndexError):
            pass
        if not served:
            return None
        client.model = str(served)
    return client


# ---------------------------------------------------------------- engine


class SglangEngine(ServerEngine):
    """An SGLang server owned by this process (one per EngineSpec per worker)."""

    kind = KIND
    health_path = HEALTH_PATH

    def __init__(self, spec: EngineSpec, devices: Devices, log_dir: Path) -> None:
        super().__init__(spec, devices, log_dir)
        self.sglang_version: Version | None = None

    def launch_plan(self, port: int) -> LaunchPlan:
        """After the fail-fast checks: the env's own server, or the image's under
        ``docker run``; nothing is started."""
        self.sglang_version = spec_version(self.spec)
        check_supported(self.spec, self.sglang_version)
        env = server_env(self.spec, self.devices)
        if not self.spec.image:
            return LaunchPlan(build_command(self.spec, port, self.host, self.sglang_version), env)
        serve = self.sglang_version is not None and self.sglang_version >= SERVE_CLI_SINCE
        default_entry = ("sglang", "serve") if serve else ("python3", "-m", LAUNCH_MODULE)
        entry = [str(a) for a in self.spec.option("container_entrypoint", default_entry)]
        name = container.container_name(self.spec, port)
        args = [*entry, *server_args(self.spec, "0.0.0.0", port)]
        cmd = container.docker_run_command(
            self.spec, self.devices, port, args, container.container_env(env), name
        )
        return LaunchPlan(cmd, {}, container.cleanup_commands(name))

    def connect(self) -> SglangClient:
        client = SglangClient(self.base_url, self.model_name())
        info = client.server_info()
        if info is None:
            raise EngineStartError(
                f"{self.spec.label}: SGLang answered {HEALTH_PATH} but neither /server_info nor "
                "/get_server_info"
            )
        self._client = client  # the record of a refused topology still shows what it resolved
        self._check_resolved(info)
        return client

    def _check_resolved(self, info: Mapping[str, Any]) -> None:
        """SGLang may rewrite the topology; a measured run must have the one it was asked."""
        wanted = topology(self.spec)
        got = topology_from_info(info)
        if wanted != got:
            raise EngineStartError(
                f"{self.spec.label}: SGLang resolved the speculative topology to {got} but "
                f"specperf asked for {wanted}; fix the method's "
                "num_speculative_tokens/topk/num_draft_tokens"
            )

    def client(self) -> SglangClient:
        return cast(SglangClient, super().client())

    def record_facts(self, live: bool) -> RecordFacts:
        facts = RecordFacts(version=str(self.sglang_version) if self.sglang_version else None)
        if live:
            info = self.client().server_info(refresh=True)
            if info:
                facts.server_config = summarize_server_info(info)
                facts.version = str(info.get("version") or facts.version)
        topo = topology(self.spec)
        facts.server_config["requested_topology"] = topo.__dict__ if topo else None
        return facts


# ---------------------------------------------------------------- engine environments

# The smallest install in which SGLang's own argument parser runs (no GPU, no CUDA torch): the
# wheel without its dependencies (pip --no-deps) plus the exact closure of what
# `sglang.srt.server_args` and `prepare_server_args` import, pinned. torch is the CPU build that
# lies on this machine's disk (2.13.0+cpu); triton, imported at module level by sglang's utils,
# too (3.8.0). 0.5.2 resolves its args at parse time, so it also needs transformers (its own
# pin, 4.56.1), openai (1.99.1) and the model-config imports. Creation time: docs/sglang.md.
# Serving needs the full CUDA install (`pip install sglang==X`), which this recipe is not.
PARSER_PINS: dict[str, tuple[str, ...]] = {}


def _pins(text: str) -> tuple[str, ...]:
    return tuple(text.split())


PARSER_PINS["0.5.23"] = _pins(
    """aiohappyeyeballs==2.7.1 aiohttp==3.14.5 aiosignal==1.4.0 annotated-types==0.8.0
    anyio==4.16.0 asttokens==3.0.2 attrs==26.1.0 certifi==2026.10.19.post1
    charset-normalizer==3.5.3 executing==2.3.0 filelock==4.3.1 frozenlist==1.8.0
    fsspec==2026.9.0 idna==3.20 ipython==9.18.1 ipython_pygments_lexers==1.1.1 jedi==0.20.1
    Jinja2==3.1.6 MarkupSafe==3.0.4 matplotlib-inline==0.2.2 mpmath==1.3.0 msgspec==0.23.0
    multidict==7.2.1 networkx==3.6.1 numpy==2.4.6 orjson==3.13.0 packaging==26.4 parso==0.8.7
    pexpect==4.9.0 pillow==13.0.0 prompt_toolkit==3.0.53 propcache==0.5.4 psutil==7.2.2
    ptyprocess==0.7.0 pure_eval==0.2.4 pybase64==1.5.1 pydantic==2.14.4 pydantic_core==2.50.5
    Pygments==2.21.0 pyzmq==27.3.0 requests==2.34.2 stack-data==0.6.3 starlette==1.10.0
    sympy==1.14.0 torch==2.13.0 tqdm==4.70.1 traitlets==5.16.1 triton==3.8.0
    typing-inspection==0.4.5 typing_extensions==4.16.0 urllib3==2.8.0 wcwidth==0.9.4
    yarl==1.25.1"""
)
PARSER_PINS["0.5.2"] = _pins(
    """aiohappyeyeballs==2.7.1 aiohttp==3.14.5 aiosignal==1.4.0 annotated-doc==0.0.7
    annotated-types==0.8.0 anyio==4.16.0 asttokens==3.0.2 attrs==26.1.0
    certifi==2026.10.19.post1 charset-normalizer==3.5.3 compressed-tensors==0.20.1 dill==0.4.1
    distro==1.9.0 einops==0.8.2 executing==2.3.0 fastapi==0.165.0 filelock==4.3.1
    frozenlist==1.8.0 fsspec==2026.9.0 h11==0.16.0 hf-xet==1.8.0 httpcore==1.0.9 httpx==0.28.1
    huggingface_hub==0.36.2 idna==3.20 ipython==9.18.1 ipython_pygments_lexers==1.1.1
    jedi==0.20.1 Jinja2==3.1.6 jiter==0.19.0 loguru==0.7.3 MarkupSafe==3.0.4
    matplotlib-inline==0.2.2 mpmath==1.3.0 msgspec==0.23.0 multidict==7.2.1 networkx==3.6.1
    numpy==2.4.6 openai==1.99.1 opentelemetry-api==1.45.2 orjson==3.13.0 packaging==26.4
    parso==0.8.7 partial-json-parser==0.2.1.1.post7 pexpect==4.9.0 pillow==13.0.0
    prompt_toolkit==3.0.53 propcache==0.5.4 psutil==7.2.2 ptyprocess==0.7.0 pure_eval==0.2.4
    pybase64==1.5.1 pydantic==2.14.4 pydantic_core==2.50.5 Pygments==2.21.0 PyYAML==6.0.4
    pyzmq==27.3.0 regex==2026.11.19 requests==2.34.2 safetensors==0.8.0 sentencepiece==0.2.3
    sniffio==1.3.1 stack-data==0.6.3 starlette==1.10.0 sympy==1.14.0 tokenizers==0.22.2
    torch==2.13.0 tqdm==4.70.1 traitlets==5.16.1 transformers==4.56.1 triton==3.8.0
    typing-inspection==0.4.5 typing_extensions==4.16.0 urllib3==2.8.0 wcwidth==0.9.4
    yarl==1.25.1"""
)
# the release the parser pins were last resolved for (unknown versions reuse them)
LATEST_PINNED = "0.5.23"
# Verify = SGLang's own parser on an EAGLE3 command for a local config-only model (0.5.2
# resolves its arguments while parsing and reads the model config: no hub, no weights).
_ENV_VERIFY_SCRIPT = r"""
import json, os, shutil, tempfile
from sglang.srt.server_args import prepare_server_args
root = tempfile.mkdtemp(prefix="specperf-sglang-verify-")
cfg = {"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 2,
       "num_key_value_heads": 1, "head_dim": 32, "vocab_size": 256, "rms_norm_eps": 1e-6,
       "max_position_embeddings": 512, "rope_theta": 10000, "hidden_act": "silu",
       "torch_dtype": "bfloat16"}
for name, extra in (("target", {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
                                "num_hidden_layers": 2}),
                    ("draft", {"architectures": ["LlamaForCausalLMEagle3"],
                               "model_type": "llama", "num_hidden_layers": 1,
                               "draft_vocab_size": 256})):
    os.makedirs(os.path.join(root, name))
    with open(os.path.join(root, name, "config.json"), "w") as fh:
        json.dump({**cfg, **extra}, fh)
a = prepare_server_args([
    "--model-path", os.path.join(root, "target"), "--device", "cpu",
    "--mem-fraction-static", "0.8", "--speculative-algorithm", "EAGLE3",
    "--speculative-draft-model-path", os.path.join(root, "draft"),
    "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
    "--speculative-num-draft-tokens", "4"])
assert (a.speculative_algorithm, a.speculative_num_steps) == ("EAGLE3", 3), a
shutil.rmtree(root, ignore_errors=True)
print("sglang parser ok")
"""


def env_recipe(requirement: str) -> Any:
    """Recipe for ``specperf env create sglang==X``: the parser env (see above)."""
    from specperf.envs import EnvRecipe, parse_requirement

    dist, version = parse_requirement(requirement)
    if dist != "sglang":
        raise ConfigError(f"{requirement}: the sglang recipe knows sglang==X")
    pins = PARSER_PINS.get(version, PARSER_PINS[LATEST_PINNED])
    return EnvRecipe(
        kind=KIND,
        requirement=requirement,
        name=f"sglang-{version}",
        install=("--no-deps", f"sglang=={version}", *pins),
        verify=_ENV_VERIFY_SCRIPT,
        versions=("sglang", "torch", "triton", "transformers"),
    )


def parse_check_script() -> str:
    """Python run IN the sglang env: parse each JSON argv (stdin) with SGLang's own
    ``prepare_server_args`` and print the parsed values (stdout, one JSON document)."""
    return _PARSE_CHECK


_PARSE_CHECK = r"""
import contextlib, io, json, sys, importlib.metadata as md
from sglang.srt.server_args import prepare_server_args
try:
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
except Exception:
    SpeculativeAlgorithm = None
FIELDS = ("model_path", "host", "port", "served_model_name", "tokenizer_path", "dtype",
          "context_length", "max_running_requests", "chunked_prefill_size", "mem_fraction_static",
          "tp_size", "disable_radix_cache", "disable_cuda_graph", "reasoning_parser",
          "enable_metrics", "device", "speculative_algorithm", "speculative_draft_model_path",
          "speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens",
          "speculative_ngram_max_bfs_breadth", "speculative_ngram_min_bfs_breadth",
          "speculative_adaptive", "decode_log_interval")
out = {"version": md.version("sglang"), "results": []}
for argv in json.load(sys.stdin):
    res = {"argv": argv}
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            a = prepare_server_args(list(argv))
        res["parsed"] = {f: getattr(a, f, None) for f in FIELDS if hasattr(a, f)}
        algo = res["parsed"].get("speculative_algorithm")
        if algo and SpeculativeAlgorithm is not None:
            res["known_algorithm"] = SpeculativeAlgorithm.from_string(algo).name
    except SystemExit as exc:
        res["error"] = "argparse exit %s: %s" % (exc.code, err.getvalue().strip()[-500:])
    except Exception as exc:
        res["error"] = "%s: %s" % (type(exc).__name__, exc)
    out["results"].append(res)
json.dump(out, sys.stdout, default=str)
"""


def parse_with_sglang(python: str, argvs: Sequence[Sequence[str]], timeout_s: float = 300) -> dict:
    """Run SGLang's own parser (in its env) over ``argvs``; returns version + per-argv results."""
    proc = subprocess.run(
        [python, "-c", _PARSE_CHECK],
        input=json.dumps([list(a) for a in argvs]),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    if proc.returncode != 0:
        raise EngineStartError(
            f"SGLang parser check failed in {python} (exit {proc.returncode}): "
            f"{proc.stderr.strip()[-800:]}"
        )
    return json.loads(proc.stdout.strip().splitlines()[-1])

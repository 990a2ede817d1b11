"""SGLang's counters → the Counters contract: Prometheus totals, per-request
``spec_tokens_details`` (the fallback), and the resolved settings in ``/server_info``. The
acceptance mapping is in the package docstring."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from specperf.engines.sglang.command import Topology
from specperf.schemas import Counters

# Prometheus sample names (SGLang's TokenizerMetricsCollector, 0.5.2 .. 0.5.23)
_GEN = "sglang:generation_tokens_total"
_PROMPT = "sglang:prompt_tokens_total"
_REQUESTS = "sglang:num_requests_total"
_CACHED = "sglang:cached_tokens_total"
_VERIFY = "sglang:spec_verify_calls_total"


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

"""vLLM's Prometheus counters → Counters, and the resolved settings of ``/server_info``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from specperf.schemas import Counters

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
# Older names, read only where the current name is absent (versions.py: the V1 engine exports
# vllm:gpu_prefix_cache_* up to 0.11.2 and vllm:prefix_cache_* from 0.9.2)
_FALLBACK_SAMPLES = {
    "vllm:gpu_prefix_cache_queries_total": "prefix_cache_queries",
    "vllm:gpu_prefix_cache_hits_total": "prefix_cache_hits",
}
# The V0 engine (CPU before 0.9.1) counts no drafts; each verified step of one request emits its
# accepted tokens plus one (the bonus or the recovered token), so drafts = emitted − accepted
# (vllm/model_executor/layers/spec_decode_base_sampler.py: num_emitted_tokens counts the
# output tokens that are not -1).
_V0_EMITTED = "vllm:spec_decode_num_emitted_tokens_total"


def parse_metrics(text: str) -> Counters:
    """vLLM ``/metrics`` text → Counters: ``_total`` samples only (``_created`` skipped),
    summed over the ``engine`` label (DP ranks), per-position by ``position``. Releases that
    use older names (versions.py) are read too: ``vllm:gpu_prefix_cache_*`` where
    ``vllm:prefix_cache_*`` is absent, and the V0 engine's drafts from its emitted tokens."""
    from prometheus_client.parser import text_string_to_metric_families

    sums: dict[str, float] = {}
    fallback: dict[str, float] = {}
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
            elif name in _FALLBACK_SAMPLES:
                key = _FALLBACK_SAMPLES[name]
                fallback[key] = fallback.get(key, 0.0) + float(sample.value)
            elif name == _V0_EMITTED:
                extra["v0_emitted_tokens"] = extra.get("v0_emitted_tokens", 0.0) + float(
                    sample.value
                )
    for key, value in fallback.items():
        sums.setdefault(key, value)
    if "drafts" not in sums and "v0_emitted_tokens" in extra and "accepted_tokens" in sums:
        sums["drafts"] = extra["v0_emitted_tokens"] - sums["accepted_tokens"]
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

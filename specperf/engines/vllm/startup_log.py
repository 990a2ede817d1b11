"""Facts from vLLM's start-up log: the non-default arguments, KV-cache capacity, memory and
engine init time (the engine record)."""

from __future__ import annotations

import ast
import re
from typing import Any

_NON_DEFAULT_RE = re.compile(r"non-default args: (\{.*\})\s*$")
_KV_TOKENS_RE = re.compile(r"(GPU|CPU|XPU) KV cache size: ([\d,]+) tokens")
_MAX_CONC_RE = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")
_INIT_ENGINE_RE = re.compile(r"init engine \(.*\) took ([\d.]+) s")
_MODEL_MEM_RE = re.compile(r"Model loading took ([\d.]+) GiB memory")
_KV_MEM_RE = re.compile(r"Available KV cache memory: ([\d.]+) GiB")


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

"""Step-by-step driving of a Hugging Face causal LM for speculative decoding.

What transformers' ``generate()`` does not give us: a forward over a block of draft tokens that
returns the fused hidden states EAGLE3 needs, and a KV cache we can rewind to the accepted
prefix. This module hides the few places where transformers moved between releases (5.17 names the
cache argument ``past_key_values``, 5.24 ``cache``; 5.17's static cache has no ``crop``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import torch


def cache_kwarg(model: torch.nn.Module) -> str:
    """Name of the KV-cache argument of ``model.forward`` in this transformers release."""
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def new_cache(model: Any, kind: str, max_len: int) -> Any:
    """A fresh KV cache: ``static`` (fixed addresses, needed for compiled/graphed steps) or
    ``dynamic`` (grows; cheapest on CPU)."""
    from transformers import DynamicCache, StaticCache

    if kind == "static":
        return StaticCache(config=model.config, max_cache_len=max_len)
    if kind == "dynamic":
        return DynamicCache(config=model.config)
    raise ValueError(f"unknown cache kind {kind!r} (static|dynamic)")


def cache_length(cache: Any) -> int:
    n = cache.get_seq_length()
    return int(n.item()) if isinstance(n, torch.Tensor) else int(n)


def rewind_cache(cache: Any, length: int, current: int | None = None) -> None:
    """Drop every position at or after ``length`` (rejected drafts).

    Static layers only move their write pointer (stale entries stay masked and are overwritten);
    dynamic layers are sliced. ``current``: the cache's length when the caller knows it (a static
    cache's length is a device tensor: reading it is a host sync)."""
    cur = cache_length(cache) if current is None else current
    drop = cur - length
    if drop <= 0:
        return
    counters: list[torch.Tensor] = []  # static layers' write pointers, moved in one launch
    for layer in cache.layers:
        cum = getattr(layer, "cumulative_length", None)
        if isinstance(cum, torch.Tensor):
            counters.append(cum)
        elif getattr(layer, "keys", None) is not None and isinstance(layer.keys, torch.Tensor):
            layer.keys = layer.keys[..., :length, :]
            layer.values = layer.values[..., :length, :]
            if isinstance(cum, int):
                layer.cumulative_length = length
        else:
            raise RuntimeError(f"cannot rewind cache layer {type(layer).__name__}")
    if counters:
        # in place (a compiled graph holds their addresses); one kernel for all layers instead
        # of one per layer — 36 launches per verify step on Qwen3-8B
        torch._foreach_sub_(counters, drop)


class TargetRunner:
    """One sequence through the target: prefill, verify blocks, rewind.

    ``aux_layer_ids`` select hidden states by EAGLE3/vLLM numbering: id L is the *input* of
    decoder layer L, i.e. ``hidden_states[L]`` of transformers' output (index 0 = embeddings).

    The sequence length is kept on the host: a static cache holds it in a device tensor, and
    reading that (``cache.get_seq_length().item()``) would be a host sync, several per verify
    step.
    """

    def __init__(
        self,
        model: Any,
        *,
        aux_layer_ids: Sequence[int] = (),
        cache: str = "dynamic",
        max_len: int = 4096,
        compiled: Callable[..., Any] | None = None,
    ) -> None:
        self.model = model
        self.aux_layer_ids = tuple(aux_layer_ids)
        self.cache_kind = cache
        self.max_len = max_len
        self.compiled = compiled
        self._kw = cache_kwarg(model)
        self.cache: Any = None
        self._length = 0  # positions in the cache (host copy of the cache's own count)
        self.device = next(model.parameters()).device

    def start(self, needed_len: int) -> None:
        """Fresh state for one request of at most ``needed_len`` positions."""
        if needed_len > self.max_len:
            raise ValueError(f"request needs {needed_len} positions, cache holds {self.max_len}")
        if self.cache_kind == "static" and self.cache is not None:
            self.cache.reset()  # keep addresses stable for compiled graphs
        else:
            self.cache = new_cache(self.model, self.cache_kind, self.max_len)
        self._length = 0

    @property
    def length(self) -> int:
        return self._length

    def rewind(self, length: int) -> None:
        rewind_cache(self.cache, length, current=self._length)
        self._length = min(self._length, length)

    @torch.inference_mode()
    def forward(
        self, ids: torch.Tensor, *, use_compiled: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Append ``ids`` (1, n) at the cache's end. Returns fp32 logits (n, V) and the fused
        aux hidden states (n, n_aux·H), or None when no aux layers were asked for."""
        start = self.length
        n = ids.shape[-1]
        pos = torch.arange(start, start + n, device=self.device).unsqueeze(0)
        kwargs: dict[str, Any] = {
            "input_ids": ids,
            "position_ids": pos,
            self._kw: self.cache,
            "use_cache": True,
            "output_hidden_states": bool(self.aux_layer_ids),
            "return_dict": True,
        }
        fn = self.compiled if (use_compiled and self.compiled is not None) else self.model
        if fn is self.compiled:
            torch.compiler.cudagraph_mark_step_begin()
        out = fn(**kwargs)
        self._length = start + n
        # copy out at once: a CUDA-graph replay overwrites its output buffers
        logits = out.logits[0].to(dtype=torch.float32, copy=fn is self.compiled)
        aux = None
        if self.aux_layer_ids:
            aux = torch.cat([out.hidden_states[i][0] for i in self.aux_layer_ids], dim=-1)
        return logits, aux


def eos_token_ids(model: Any, tokenizer: Any) -> set[int]:
    """Every id that ends generation: the model's generation config and config, and the
    tokenizer's (Qwen3 lists several)."""
    ids: set[int] = set()
    for src in (getattr(model, "generation_config", None), model.config):
        e = getattr(src, "eos_token_id", None) if src is not None else None
        if isinstance(e, int):
            ids.add(e)
        elif isinstance(e, (list, tuple)):
            ids.update(int(x) for x in e)
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    return ids

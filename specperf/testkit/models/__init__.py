"""Tiny local test models: a random-weight Qwen3 target, its BPE tokenizer and an EAGLE3 head.

Why: CI and unit tests need a real checkpoint that vLLM, SGLang and transformers all load, with
no hub access and in seconds. Everything is generated from code (corpus, tokenizer, weights) with
fixed seeds, so the same recipe gives the same files, and the cache directory is named by the
recipe's hash: ``~/.cache/specperf/models/tiny-qwen3-<hash>/`` (override the root with
``SPECPERF_MODELS_DIR``). Layout::

    tiny-qwen3-<hash>/            the target (Qwen3ForCausalLM, bf16 safetensors, tokenizer)
    tiny-qwen3-<hash>/eagle3/     an EAGLE3 head (LlamaForCausalLMEagle3 format, d2t/t2d)
    tiny-qwen3-<hash>/manifest.json   recipe, versions and file sha256s; written last

``specperf model build [--out DIR]`` builds it and prints the target path as its last line.

Modules: ``recipe`` (what decides the files, and its digest), ``corpus`` (the generated text),
``tokenizer``, ``artifacts`` (layout names, seeded tensors, file hashes), ``qwen3`` (target and
EAGLE3 head), ``cache`` (where, and built once), ``dflash`` and ``mtp`` (on-demand extras),
``cli`` (``specperf model``). Every public name is re-exported here.
"""

from __future__ import annotations

from specperf.testkit.models.artifacts import EAGLE3_DIR, MANIFEST
from specperf.testkit.models.cache import (
    build_tiny_model,
    ensure_tiny_model,
    is_complete,
    models_root,
    tiny_eagle3_path,
    tiny_model_path,
)
from specperf.testkit.models.cli import add_arguments, main, run
from specperf.testkit.models.corpus import corpus_digest
from specperf.testkit.models.dflash import (
    DFLASH_BLOCK_SIZE,
    DFLASH_DIR,
    DFLASH_LAYERS,
    DFLASH_TARGET_LAYER_IDS,
    build_tiny_dflash,
    ensure_tiny_dflash,
)
from specperf.testkit.models.mtp import (
    MTP_BUILDER_VERSION,
    MTP_CONFIG,
    MTP_NAME,
    ensure_tiny_mtp_model,
)
from specperf.testkit.models.recipe import (
    BUILDER_VERSION,
    COMPUTE_RECIPE,
    DEFAULT_RECIPE,
    RECIPES,
    TinyRecipe,
    recipe_named,
)
from specperf.testkit.models.tokenizer import (
    ADDED_TOKENS,
    CHAT_TEMPLATE,
    QWEN_SPLIT_PATTERN,
    SPECIAL_TOKENS,
)

__all__ = [
    "ADDED_TOKENS",
    "BUILDER_VERSION",
    "CHAT_TEMPLATE",
    "COMPUTE_RECIPE",
    "DEFAULT_RECIPE",
    "DFLASH_BLOCK_SIZE",
    "DFLASH_DIR",
    "DFLASH_LAYERS",
    "DFLASH_TARGET_LAYER_IDS",
    "EAGLE3_DIR",
    "MANIFEST",
    "MTP_BUILDER_VERSION",
    "MTP_CONFIG",
    "MTP_NAME",
    "QWEN_SPLIT_PATTERN",
    "RECIPES",
    "SPECIAL_TOKENS",
    "TinyRecipe",
    "add_arguments",
    "build_tiny_dflash",
    "build_tiny_model",
    "corpus_digest",
    "ensure_tiny_dflash",
    "ensure_tiny_model",
    "ensure_tiny_mtp_model",
    "is_complete",
    "main",
    "models_root",
    "recipe_named",
    "run",
    "tiny_eagle3_path",
    "tiny_model_path",
]

"""The tiny DFlash draft (on demand): random-init, in the z-lab checkpoint format, kept at
``<target>/dflash`` with its own manifest and digest."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from specperf.testkit.models.artifacts import (
    MANIFEST,
    _file_hashes,
    _random_tensors,
    build_once,
)
from specperf.testkit.models.cache import ensure_tiny_model
from specperf.testkit.models.recipe import DEFAULT_RECIPE, TinyRecipe

DFLASH_DIR = "dflash"
DFLASH_LAYERS = 2
DFLASH_BLOCK_SIZE = 4
DFLASH_TARGET_LAYER_IDS = (0, 1, 2)  # DFlash semantics: vLLM adds 1 (aux ids 1, 2, 3)


def _dflash_digest(recipe: TinyRecipe) -> str:
    blob = json.dumps(
        {
            "target": recipe.digest(),
            "layers": DFLASH_LAYERS,
            "block_size": DFLASH_BLOCK_SIZE,
            "target_layer_ids": DFLASH_TARGET_LAYER_IDS,
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def _build_dflash(recipe: TinyRecipe, target: Path, out: Path) -> None:
    """A random-init DFlash draft in the z-lab checkpoint format (``DFlashDraftModel``, Qwen3
    decoder layers, ``fc`` over the target layers' hidden states, ``hidden_norm``, ``norm``;
    embeddings and lm_head shared with the target). The mask token is ``<|endoftext|>`` (real
    checkpoints use an id past the tokenizer; the tiny vocab has no spare one)."""
    import torch
    from safetensors.torch import save_file

    h, nh, nkv, hd = (
        recipe.hidden_size,
        recipe.num_attention_heads,
        recipe.num_key_value_heads,
        recipe.head_dim,
    )
    inter = recipe.intermediate_size
    shapes: dict[str, tuple[int, ...]] = {
        "fc.weight": (h, len(DFLASH_TARGET_LAYER_IDS) * h),
        "hidden_norm.weight": (h,),
        "norm.weight": (h,),
    }
    for i in range(DFLASH_LAYERS):
        p = f"layers.{i}."
        shapes.update(
            {
                p + "input_layernorm.weight": (h,),
                p + "post_attention_layernorm.weight": (h,),
                p + "self_attn.q_proj.weight": (nh * hd, h),
                p + "self_attn.k_proj.weight": (nkv * hd, h),
                p + "self_attn.v_proj.weight": (nkv * hd, h),
                p + "self_attn.o_proj.weight": (h, nh * hd),
                p + "self_attn.q_norm.weight": (hd,),
                p + "self_attn.k_norm.weight": (hd,),
                p + "mlp.gate_proj.weight": (inter, h),
                p + "mlp.up_proj.weight": (inter, h),
                p + "mlp.down_proj.weight": (h, inter),
            }
        )
    tensors = _random_tensors(shapes, recipe.seed + 2, recipe.init_std, {})
    dtype = getattr(torch, recipe.dtype)
    out.mkdir(parents=True, exist_ok=True)
    save_file(
        {k: v.to(dtype).contiguous() for k, v in tensors.items()},
        str(out / "model.safetensors"),
        metadata={"format": "pt"},
    )
    (out / "model.safetensors").chmod(0o644)
    cfg = json.loads((target / "config.json").read_text())
    cfg.update(
        {
            "architectures": ["DFlashDraftModel"],
            "num_hidden_layers": DFLASH_LAYERS,
            "num_target_layers": recipe.num_hidden_layers,
            "block_size": DFLASH_BLOCK_SIZE,
            "layer_types": ["full_attention"] * DFLASH_LAYERS,
            "dflash_config": {
                "mask_token_id": cfg["bos_token_id"],
                "target_layer_ids": list(DFLASH_TARGET_LAYER_IDS),
            },
        }
    )
    (out / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    manifest = {"dflash_digest": _dflash_digest(recipe), "files": _file_hashes(out)}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def build_tiny_dflash(target: Path, recipe: TinyRecipe = DEFAULT_RECIPE) -> Path:
    """Add the tiny DFlash draft to a built target at ``<target>/dflash`` (once; kept apart from
    the target's manifest so adding it changes no existing path or hash)."""
    target = Path(target)
    return build_once(
        target / DFLASH_DIR,
        target.parent / f".{target.name}-dflash.lock",
        "dflash_digest",
        _dflash_digest(recipe),
        lambda tmp: _build_dflash(recipe, target, tmp),
    )


def ensure_tiny_dflash(recipe: TinyRecipe = DEFAULT_RECIPE, root: Path | None = None) -> Path:
    """Path of the tiny DFlash draft for the cached tiny target, built on first use."""
    return build_tiny_dflash(ensure_tiny_model(recipe, root), recipe)

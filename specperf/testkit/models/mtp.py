"""The tiny Qwen3-Next target with one MTP layer (on demand), same tokenizer as the tiny Qwen3,
cached at ``<root>/tiny-qwen3-next-mtp-<digest>``."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from specperf.testkit.models.artifacts import MANIFEST, _file_hashes, build_once
from specperf.testkit.models.cache import ensure_tiny_model
from specperf.testkit.models.recipe import DEFAULT_RECIPE, TinyRecipe

MTP_NAME = "tiny-qwen3-next-mtp"
MTP_BUILDER_VERSION = 1
# Qwen3-Next shape in miniature: 3 gated-delta-net layers + 1 full-attention layer, 4 experts
# (top 2) + a shared expert, and one MTP layer (a copy of the full-attention layer's shape).
MTP_CONFIG: dict[str, Any] = {
    "num_hidden_layers": 4,
    "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"],
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 4,
    "linear_key_head_dim": 64,
    "linear_value_head_dim": 64,
    "linear_conv_kernel_dim": 4,
    "num_experts": 4,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 128,
    "shared_expert_intermediate_size": 128,
    "decoder_sparse_step": 1,
    "mlp_only_layers": [],
    "num_nextn_predict_layers": 1,
}


def _mtp_digest(recipe: TinyRecipe) -> str:
    blob = json.dumps(
        {"target": recipe.digest(), "mtp": MTP_CONFIG, "builder": MTP_BUILDER_VERSION},
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def _build_mtp(recipe: TinyRecipe, tokenizer_dir: Path, out: Path) -> None:
    """Random-init Qwen3NextForCausalLM (transformers' own init, seeded) saved in the checkpoint
    format, plus ``mtp.*`` weights as vLLM's qwen3_next_mtp loads them: ``mtp.fc`` (2H → H),
    ``mtp.pre_fc_norm_embedding``/``mtp.pre_fc_norm_hidden``/``mtp.norm`` and ``mtp.layers.0``
    with the full-attention layer's tensors."""
    import torch
    from safetensors.torch import load_file, save_file
    from transformers import AutoModelForCausalLM, Qwen3NextConfig

    cfg = Qwen3NextConfig(
        vocab_size=recipe.vocab_size,
        hidden_size=recipe.hidden_size,
        intermediate_size=recipe.intermediate_size,
        num_attention_heads=recipe.num_attention_heads,
        num_key_value_heads=recipe.num_key_value_heads,
        head_dim=recipe.head_dim,
        max_position_embeddings=recipe.max_position_embeddings,
        rms_norm_eps=recipe.rms_norm_eps,
        tie_word_embeddings=False,
        bos_token_id=0,
        eos_token_id=2,
        pad_token_id=0,
        **{k: v for k, v in MTP_CONFIG.items() if k != "num_nextn_predict_layers"},
    )
    torch.manual_seed(recipe.seed + 3)
    model = AutoModelForCausalLM.from_config(cfg, dtype=getattr(torch, recipe.dtype))
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))
    shards = sorted(out.glob("*.safetensors"))
    state: dict[str, Any] = {}
    for shard in shards:
        state.update(load_file(str(shard)))
        shard.unlink()
    (out / "model.safetensors.index.json").unlink(missing_ok=True)
    full = MTP_CONFIG["layer_types"].index("full_attention")
    src = f"model.layers.{full}."
    for key in [k for k in state if k.startswith(src)]:
        state["mtp.layers.0." + key[len(src) :]] = state[key].clone()
    gen = torch.Generator().manual_seed(recipe.seed + 4)
    h = recipe.hidden_size
    dtype = getattr(torch, recipe.dtype)
    state["mtp.fc.weight"] = (torch.randn(h, 2 * h, generator=gen) * recipe.init_std).to(dtype)
    for name in ("mtp.norm", "mtp.pre_fc_norm_hidden", "mtp.pre_fc_norm_embedding"):
        state[f"{name}.weight"] = torch.zeros(h, dtype=dtype)  # zero-centred RMSNorm
    save_file(
        {k: v.contiguous() for k, v in sorted(state.items())},
        str(out / "model.safetensors"),
        metadata={"format": "pt"},
    )
    (out / "model.safetensors").chmod(0o644)
    config = json.loads((out / "config.json").read_text())
    config["num_nextn_predict_layers"] = MTP_CONFIG["num_nextn_predict_layers"]
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        shutil.copy(tokenizer_dir / name, out / name)
    gen_cfg = json.loads((tokenizer_dir / "generation_config.json").read_text())
    (out / "generation_config.json").write_text(json.dumps(gen_cfg, indent=2, sort_keys=True))
    manifest = {"mtp_digest": _mtp_digest(recipe), "files": _file_hashes(out)}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def ensure_tiny_mtp_model(recipe: TinyRecipe = DEFAULT_RECIPE, root: Path | None = None) -> Path:
    """A tiny Qwen3-Next target with one MTP layer (``method = "mtp"`` needs no draft path),
    same tokenizer as the tiny Qwen3; cached at ``<root>/tiny-qwen3-next-mtp-<hash>``."""
    tokenizer_dir = ensure_tiny_model(recipe, root)
    digest = _mtp_digest(recipe)
    out = tokenizer_dir.parent / f"{MTP_NAME}-{digest}"
    return build_once(
        out,
        out.parent / f".{out.name}.lock",
        "mtp_digest",
        digest,
        lambda tmp: _build_mtp(recipe, tokenizer_dir, tmp),
    )

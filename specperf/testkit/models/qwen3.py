"""The tiny Qwen3 target and its random-init EAGLE3 head: weights, configs, generation config,
and the build of one recipe into one directory (``_build_into``; ``cache`` makes it atomic)."""

from __future__ import annotations

import collections
import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from specperf.testkit.models.artifacts import EAGLE3_DIR, MANIFEST, _file_hashes, _random_tensors
from specperf.testkit.models.corpus import _corpus
from specperf.testkit.models.recipe import BUILDER_VERSION, TinyRecipe
from specperf.testkit.models.tokenizer import (
    ADDED_TOKENS,
    SPECIAL_TOKENS,
    _save_tokenizer,
    _train_tokenizer,
)


def _target_config(recipe: TinyRecipe, tok: Any) -> dict[str, Any]:
    return {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "vocab_size": recipe.vocab_size,
        "hidden_size": recipe.hidden_size,
        "intermediate_size": recipe.intermediate_size,
        "num_hidden_layers": recipe.num_hidden_layers,
        "num_attention_heads": recipe.num_attention_heads,
        "num_key_value_heads": recipe.num_key_value_heads,
        "head_dim": recipe.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": recipe.max_position_embeddings,
        "max_window_layers": recipe.num_hidden_layers,
        "rms_norm_eps": recipe.rms_norm_eps,
        "rope_theta": recipe.rope_theta,
        "rope_scaling": None,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "use_sliding_window": False,
        "sliding_window": None,
        "tie_word_embeddings": False,
        "initializer_range": recipe.init_std,
        "use_cache": True,
        "bos_token_id": tok.token_to_id("<|endoftext|>"),
        "eos_token_id": tok.token_to_id("<|im_end|>"),
        "torch_dtype": recipe.dtype,
    }


def _build_target(recipe: TinyRecipe, tok: Any, out: Path) -> dict[str, Any]:
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, Qwen3Config

    cfg = _target_config(recipe, tok)
    with torch.device("meta"):
        skeleton = AutoModelForCausalLM.from_config(Qwen3Config(**cfg))
    shapes = {k: tuple(v.shape) for k, v in skeleton.state_dict().items()}
    tensors = _random_tensors(shapes, recipe.seed, recipe.init_std, {"lm_head": recipe.lm_head_std})
    dtype = getattr(torch, recipe.dtype)
    save_file(
        {k: v.to(dtype).contiguous() for k, v in tensors.items()},
        str(out / "model.safetensors"),
        metadata={"format": "pt"},
    )
    (out / "model.safetensors").chmod(0o644)
    (out / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    gen = {
        "bos_token_id": cfg["bos_token_id"],
        "eos_token_id": [tok.token_to_id("<|im_end|>"), tok.token_to_id("<|endoftext|>")],
        "pad_token_id": tok.token_to_id("<|endoftext|>"),
        **recipe.generation_defaults,
    }
    (out / "generation_config.json").write_text(json.dumps(gen, indent=2, sort_keys=True) + "\n")
    return cfg


def _draft_vocab(recipe: TinyRecipe, tok: Any, corpus: list[str]) -> list[int]:
    """Target ids the EAGLE3 head may propose: specials plus the most frequent corpus tokens
    (how EAGLE3 training picks its draft vocabulary), in ascending id order."""
    counts: collections.Counter[int] = collections.Counter()
    for enc in tok.encode_batch(corpus):
        counts.update(enc.ids)
    keep = {tok.token_to_id(t) for t in (*SPECIAL_TOKENS, *ADDED_TOKENS)}
    for tid, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        if len(keep) >= recipe.eagle3_draft_vocab_size:
            break
        keep.add(tid)
    tid = 0
    while len(keep) < recipe.eagle3_draft_vocab_size:  # corpus too small: fill by id
        keep.add(tid)
        tid += 1
    return sorted(keep)


def _build_eagle3(recipe: TinyRecipe, tok: Any, corpus: list[str], out: Path) -> dict[str, Any]:
    """EAGLE3 head in the checkpoint format vLLM/SGLang load (``LlamaForCausalLMEagle3``):
    one ``midlayer`` taking cat(embed, hidden) (2H wide qkv input), ``fc`` over the 3 aux target
    hidden states, own ``lm_head`` over a reduced draft vocab mapped back by ``d2t``."""
    import torch
    from safetensors.torch import save_file

    h, nh, nkv, hd = (
        recipe.hidden_size,
        recipe.num_attention_heads,
        recipe.num_key_value_heads,
        recipe.head_dim,
    )
    inter, dv = recipe.eagle3_intermediate_size, recipe.eagle3_draft_vocab_size
    n_aux = len(recipe.eagle3_aux_layer_ids)
    shapes: dict[str, tuple[int, ...]] = {
        "fc.weight": (h, n_aux * h),
        "midlayer.hidden_norm.weight": (h,),
        "midlayer.input_layernorm.weight": (h,),
        "midlayer.post_attention_layernorm.weight": (h,),
        "midlayer.self_attn.q_proj.weight": (nh * hd, 2 * h),
        "midlayer.self_attn.k_proj.weight": (nkv * hd, 2 * h),
        "midlayer.self_attn.v_proj.weight": (nkv * hd, 2 * h),
        "midlayer.self_attn.o_proj.weight": (h, nh * hd),
        "midlayer.mlp.gate_proj.weight": (inter, h),
        "midlayer.mlp.up_proj.weight": (inter, h),
        "midlayer.mlp.down_proj.weight": (h, inter),
        "norm.weight": (h,),
        "lm_head.weight": (dv, h),
    }
    tensors = _random_tensors(
        shapes, recipe.seed + 1, recipe.init_std, {"lm_head": recipe.lm_head_std}
    )
    dtype = getattr(torch, recipe.dtype)
    state = {k: v.to(dtype).contiguous() for k, v in tensors.items()}
    selected = torch.tensor(_draft_vocab(recipe, tok, corpus), dtype=torch.long)
    state["d2t"] = selected - torch.arange(dv, dtype=torch.long)  # target = draft + d2t[draft]
    t2d = torch.zeros(recipe.vocab_size, dtype=torch.bool)
    t2d[selected] = True
    state["t2d"] = t2d
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "model.safetensors").chmod(0o644)
    cfg = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "hidden_size": h,
        "intermediate_size": inter,
        "num_hidden_layers": 1,
        "num_attention_heads": nh,
        "num_key_value_heads": nkv,
        "head_dim": hd,
        "hidden_act": "silu",
        "max_position_embeddings": recipe.max_position_embeddings,  # RoPE cache: see vllm #48894
        "rms_norm_eps": recipe.rms_norm_eps,
        "rope_theta": recipe.rope_theta,
        "rope_scaling": None,
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": False,
        "vocab_size": recipe.vocab_size,
        "draft_vocab_size": dv,
        "target_hidden_size": h,
        "bos_token_id": tok.token_to_id("<|endoftext|>"),
        "eos_token_id": tok.token_to_id("<|im_end|>"),
        "torch_dtype": recipe.dtype,
        "eagle_config": {
            "eagle_aux_hidden_state_layer_ids": list(recipe.eagle3_aux_layer_ids),
            "use_aux_hidden_state": True,
        },
    }
    (out / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    return cfg


def _build_into(recipe: TinyRecipe, out: Path) -> None:
    import tokenizers
    import torch
    import transformers

    started = time.monotonic()
    corpus = _corpus(recipe)
    tok = _train_tokenizer(recipe, corpus)
    out.mkdir(parents=True, exist_ok=True)
    _save_tokenizer(recipe, tok, out)
    _build_target(recipe, tok, out)
    (out / EAGLE3_DIR).mkdir(exist_ok=True)
    _build_eagle3(recipe, tok, corpus, out / EAGLE3_DIR)
    manifest = {
        "name": recipe.name,
        "recipe_digest": recipe.digest(),
        "builder_version": BUILDER_VERSION,
        "recipe": asdict(recipe),
        "versions": {
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "tokenizers": tokenizers.__version__,
        },
        "build_s": round(time.monotonic() - started, 2),
        "files": _file_hashes(out),
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")

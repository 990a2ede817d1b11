"""The GPU night's models: config.json files of real shapes (random weights are made from them on
the device) with the tiny tokenizer, or tiny shapes for a dry run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

# Real shapes (public config.json values) — random weights are made from these on the device.
QWEN3_8B = {
    "hidden_size": 4096,
    "intermediate_size": 12288,
    "num_hidden_layers": 36,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 151936,
    "max_position_embeddings": 40960,
    "tie_word_embeddings": False,
}
QWEN3_06B = {
    "hidden_size": 1024,
    "intermediate_size": 3072,
    "num_hidden_layers": 28,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 151936,
    "max_position_embeddings": 40960,
    "tie_word_embeddings": True,
}
EAGLE3_8B = {  # the published Qwen3-8B EAGLE3 heads' shape
    "hidden_size": 4096,
    "intermediate_size": 12288,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 151936,
    "draft_vocab_size": 32000,
    "aux": [2, 18, 33],
    "max_position_embeddings": 40960,
}
TINY_T = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "max_position_embeddings": 4096,
    "tie_word_embeddings": False,
}
TINY_D = {**TINY_T, "num_hidden_layers": 2, "tie_word_embeddings": True}
TINY_E = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "draft_vocab_size": 512,
    "aux": [1, 2, 3],
    "max_position_embeddings": 4096,
}


def qwen3_config(shape: dict[str, Any], eos: int, bos: int) -> dict[str, Any]:
    return {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "hidden_act": "silu",
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "rope_scaling": None,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "use_sliding_window": False,
        "sliding_window": None,
        "max_window_layers": shape["num_hidden_layers"],
        "initializer_range": 0.02,
        "use_cache": True,
        "bos_token_id": bos,
        "eos_token_id": eos,
        "torch_dtype": "bfloat16",
        **shape,
    }


def eagle3_config(shape: dict[str, Any]) -> dict[str, Any]:
    from specperf.engines.transformers.eagle3.config import Eagle3Config

    s = dict(shape)
    aux = tuple(s.pop("aux"))
    cfg = Eagle3Config(
        aux_layer_ids=aux,
        target_hidden_size=s["hidden_size"],
        rope_theta=1000000.0,
        **s,
    )
    return {**cfg.to_json(), "torch_dtype": "bfloat16"}


def build_models(models_dir: Path, shapes: str) -> dict[str, str]:
    """config.json (+ the tiny tokenizer, whose ids the random model's vocabulary covers) for
    target, draft and EAGLE3 head. The tokenizer has 2048 tokens: ids above decode to nothing,
    and the token ids streamed per chunk carry the output."""
    from specperf.testkit.models import ensure_tiny_model

    tiny = ensure_tiny_model()
    tok_cfg = json.loads((tiny / "config.json").read_text())
    eos, bos = int(tok_cfg["eos_token_id"]), int(tok_cfg["bos_token_id"])
    if shapes == "qwen3-8b":
        target, draft, head = QWEN3_8B, QWEN3_06B, EAGLE3_8B
    else:
        vocab = int(tok_cfg["vocab_size"])
        target, draft = {**TINY_T, "vocab_size": vocab}, {**TINY_D, "vocab_size": vocab}
        head = {**TINY_E, "vocab_size": vocab}
    out = {}
    for name, cfg in (
        ("qwen3-8b-shape", qwen3_config(target, eos, bos)),
        ("qwen3-0.6b-shape", qwen3_config(draft, eos, bos)),
        ("qwen3-8b-eagle3-shape", eagle3_config(head)),
    ):
        d = models_dir / name
        d.mkdir(parents=True, exist_ok=True)
        (d / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
        if "eagle3" not in name:
            for f in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
                shutil.copy(tiny / f, d / f)
            gen = {"eos_token_id": eos, "bos_token_id": bos, "pad_token_id": 0}
            (d / "generation_config.json").write_text(json.dumps(gen) + "\n")
        out[name] = str(d)
    return out

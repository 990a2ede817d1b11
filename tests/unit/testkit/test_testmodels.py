"""The tiny test models: loadable, Qwen3-shaped, EAGLE3 head consistent, deterministic, cached."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from specperf.testkit.models import (
    DEFAULT_RECIPE,
    EAGLE3_DIR,
    build_tiny_model,
    cache,
    ensure_tiny_model,
    is_complete,
    tiny_model_path,
)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def test_tokenizer_matches_model_vocab_and_has_qwen_tokens(built: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(built)
    cfg = json.loads((built / "config.json").read_text())
    assert len(tok) == cfg["vocab_size"] == DEFAULT_RECIPE.vocab_size
    for special in ("<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>"):
        ids = tok.encode(special, add_special_tokens=False)
        assert len(ids) == 1, special
    assert tok.eos_token == "<|im_end|>"
    text = "Explain 12 + 30 = 42, then 你好."
    assert tok.decode(tok.encode(text, add_special_tokens=False)) == text


def test_chat_template_honours_enable_thinking(built: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(built)
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi?"}]
    off = tok.apply_chat_template(
        msgs, tokenize=False, add_generation_prompt=True, enable_thinking=False
    )
    on = tok.apply_chat_template(
        msgs, tokenize=False, add_generation_prompt=True, enable_thinking=True
    )
    assert off == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi?<|im_end|>\n"
        "<|im_start|>assistant\n<think>\n\n</think>\n\n"
    )
    assert on.endswith("<|im_start|>assistant\n")
    # earlier assistant turns lose their thinking (Qwen3 behaviour, matters for multi-turn)
    two = tok.apply_chat_template(
        [*msgs, {"role": "assistant", "content": "<think>\nhm\n</think>\n\nHello."}],
        tokenize=False,
    )
    assert "hm" not in two and two.endswith("<|im_start|>assistant\nHello.<|im_end|>\n")


def test_target_loads_and_generates_in_transformers(built: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(built)
    assert type(model).__name__ == "Qwen3ForCausalLM"
    assert model.config.max_position_embeddings >= 4096
    ids = torch.tensor([[1, 401, 201, 382]])
    out = model.generate(ids, max_new_tokens=8, do_sample=False)
    assert out.shape == (1, 12)


def test_eagle3_head_is_in_vllm_checkpoint_format(built: Path) -> None:
    import torch
    from safetensors.torch import load_file

    head = built / EAGLE3_DIR
    cfg = json.loads((head / "config.json").read_text())
    target = json.loads((built / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLMEagle3"]
    assert cfg["num_hidden_layers"] == 1
    assert cfg["vocab_size"] == target["vocab_size"]
    assert cfg["max_position_embeddings"] == target["max_position_embeddings"]
    layer_ids = cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"]
    assert len(layer_ids) == 3 and all(0 <= i <= target["num_hidden_layers"] for i in layer_ids)

    w = load_file(str(head / "model.safetensors"))
    h, dv = cfg["hidden_size"], cfg["draft_vocab_size"]
    assert w["fc.weight"].shape == (h, 3 * h)
    assert w["midlayer.self_attn.q_proj.weight"].shape[1] == 2 * h  # cat(embed, hidden)
    assert w["lm_head.weight"].shape == (dv, h)
    d2t, t2d = w["d2t"], w["t2d"]
    assert d2t.dtype == torch.int64 and d2t.shape == (dv,)
    assert t2d.dtype == torch.bool and t2d.shape == (cfg["vocab_size"],)
    targets = torch.arange(dv) + d2t
    assert bool((targets[1:] > targets[:-1]).all())  # ascending, unique
    assert int(t2d.sum()) == dv and bool(t2d[targets].all())
    assert bool(t2d[2])  # <|im_end|> can be drafted


def test_build_is_deterministic_and_manifest_lists_files(built: Path, tmp_path: Path) -> None:
    again = build_tiny_model(tmp_path / "again")
    first = json.loads((built / "manifest.json").read_text())["files"]
    second = json.loads((again / "manifest.json").read_text())["files"]
    assert first == second
    assert "model.safetensors" in first and f"{EAGLE3_DIR}/model.safetensors" in first


def test_ensure_caches_by_recipe_hash(
    built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPECPERF_MODELS_DIR", str(tmp_path))
    path = tiny_model_path()
    assert path.parent == tmp_path and path.name.startswith(DEFAULT_RECIPE.name + "-")
    # a finished build in place is reused, not rebuilt
    import shutil

    shutil.copytree(built, path)
    stamp = (path / "model.safetensors").stat().st_mtime_ns
    calls: list[object] = []
    monkeypatch.setattr(cache, "_build_into", lambda *a: calls.append(a))
    assert ensure_tiny_model() == path
    assert calls == [] and (path / "model.safetensors").stat().st_mtime_ns == stamp
    # another recipe gets another directory and counts as not built
    other = dataclasses.replace(DEFAULT_RECIPE, num_hidden_layers=2)
    assert tiny_model_path(other) != path and not is_complete(path, other)


def test_incomplete_build_leaves_no_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(recipe: object, out: Path) -> None:
        out.mkdir(parents=True)
        (out / "config.json").write_text("{}")
        raise RuntimeError("disk full")

    monkeypatch.setattr(cache, "_build_into", boom)
    with pytest.raises(RuntimeError):
        build_tiny_model(tmp_path / "m")
    assert not (tmp_path / "m").exists()
    assert [p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")] == []


def test_dflash_draft_is_in_zlab_format_and_built_once(built: Path) -> None:
    from safetensors.torch import load_file

    from specperf.testkit.models import DFLASH_DIR, build_tiny_dflash

    out = build_tiny_dflash(built)
    assert out == built / DFLASH_DIR
    cfg = json.loads((out / "config.json").read_text())
    target = json.loads((built / "config.json").read_text())
    assert cfg["architectures"] == ["DFlashDraftModel"] and cfg["model_type"] == "qwen3"
    assert cfg["vocab_size"] == target["vocab_size"]
    ids = cfg["dflash_config"]["target_layer_ids"]
    assert all(0 <= i + 1 <= target["num_hidden_layers"] for i in ids)  # vLLM adds 1
    assert cfg["dflash_config"]["mask_token_id"] < target["vocab_size"]
    w = load_file(str(out / "model.safetensors"))
    h = cfg["hidden_size"]
    assert w["fc.weight"].shape == (h, len(ids) * h)
    assert {"hidden_norm.weight", "norm.weight", "layers.1.self_attn.q_norm.weight"} <= set(w)
    assert not any(k.startswith(("embed_tokens", "lm_head")) for k in w)  # shared with target
    stamp = (out / "model.safetensors").stat().st_mtime_ns
    assert build_tiny_dflash(built) == out
    assert (out / "model.safetensors").stat().st_mtime_ns == stamp
    assert is_complete(built)  # the target's manifest is untouched


def test_mtp_target_has_qwen3_next_mtp_weights(tmp_path: Path) -> None:
    from safetensors.torch import load_file

    from specperf.testkit.models import MTP_NAME, ensure_tiny_mtp_model

    path = ensure_tiny_mtp_model(root=tmp_path)
    assert path.parent == tmp_path and path.name.startswith(MTP_NAME + "-")
    cfg = json.loads((path / "config.json").read_text())
    assert cfg["model_type"] == "qwen3_next" and cfg["num_nextn_predict_layers"] == 1
    assert cfg["architectures"] == ["Qwen3NextForCausalLM"]
    w = load_file(str(path / "model.safetensors"))
    h = cfg["hidden_size"]
    assert w["mtp.fc.weight"].shape == (h, 2 * h)
    assert {
        "mtp.norm.weight",
        "mtp.pre_fc_norm_hidden.weight",
        "mtp.pre_fc_norm_embedding.weight",
    } <= set(w)
    full = cfg["layer_types"].index("full_attention")
    layer = {k[len(f"model.layers.{full}.") :] for k in w if k.startswith(f"model.layers.{full}.")}
    assert (
        layer and {k[len("mtp.layers.0.") :] for k in w if k.startswith("mtp.layers.0.")} == layer
    )
    assert "mlp.experts.0.gate_proj.weight" in layer  # per-expert names, as vLLM loads them
    assert (path / "tokenizer.json").read_bytes() == (
        ensure_tiny_model(root=tmp_path) / "tokenizer.json"
    ).read_bytes()
    stamp = (path / "model.safetensors").stat().st_mtime_ns
    assert ensure_tiny_mtp_model(root=tmp_path) == path
    assert (path / "model.safetensors").stat().st_mtime_ns == stamp

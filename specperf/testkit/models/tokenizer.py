"""The tiny BPE tokenizer: Qwen-style special and added tokens, split pattern and chat template,
trained on the generated corpus and saved so transformers 4.x and 5.x both load it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specperf.errors import SpecperfError

if TYPE_CHECKING:
    from specperf.testkit.models.recipe import TinyRecipe

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

"""The CPU fit of a tiny target (``fit_head``) and the one the cpu-tiny suite relies on
(``default_fit``: its prompts' own continuations plus other shipped prompts, judged on them and
on held-out GSM8K prompts)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from specperf.engines.transformers.eagle3.checkpoint import new_head, save_head
from specperf.engines.transformers.eagle3.config import Eagle3Config, default_aux_layer_ids
from specperf.engines.transformers.eagle3.target import eos_token_ids
from specperf.testkit.eagle3_fit.config import HELDOUT, FitConfig, FitReport
from specperf.testkit.eagle3_fit.data import collect, pick_draft_vocab
from specperf.testkit.eagle3_fit.evaluate import evaluate_mal
from specperf.testkit.eagle3_fit.prompts import chat_ids, pool_prompts, suite_prompts
from specperf.testkit.eagle3_fit.training import train


def fit_head(
    target: str | Path,
    out: str | Path,
    cfg: FitConfig = FitConfig(),
    *,
    train_texts: Sequence[str],
    eval_sets: dict[str, Sequence[str]] | None = None,
    eval_k: int = 3,
    eval_max_tokens: int = 64,
    log: Any = None,
) -> FitReport:
    """Collect on ``train_texts``, train, save (published format + fit.json), then evaluate
    greedy MAL at ``eval_k`` on each named prompt set of ``eval_sets``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    def say(msg: str) -> None:
        if log is not None:
            print(msg, file=log, flush=True)

    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    tokenizer = AutoTokenizer.from_pretrained(str(target))
    model = AutoModelForCausalLM.from_pretrained(str(target), dtype=torch.float32).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    mcfg = model.config
    eos = eos_token_ids(model, tokenizer)
    aux_ids = cfg.aux_layer_ids or default_aux_layer_ids(mcfg.num_hidden_layers)

    started = time.monotonic()
    prompts = [chat_ids(tokenizer, t) for t in train_texts]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else min(eos)
    examples = collect(
        model, prompts, aux_ids, cfg.gen_tokens, eos, pad_id=pad, context=cfg.context
    )
    t_collect = time.monotonic() - started
    positions = sum(len(e.ids) for e in examples)
    say(f"collected {len(examples)} sequences, {positions} positions in {t_collect:.1f}s")

    head_dim = getattr(mcfg, "head_dim", None) or mcfg.hidden_size // mcfg.num_attention_heads
    dv = cfg.draft_vocab_size or mcfg.vocab_size // 2
    hcfg = Eagle3Config(
        hidden_size=mcfg.hidden_size,
        intermediate_size=cfg.intermediate_size or mcfg.intermediate_size,
        num_attention_heads=mcfg.num_attention_heads,
        num_key_value_heads=mcfg.num_key_value_heads,
        head_dim=head_dim,
        vocab_size=mcfg.vocab_size,
        draft_vocab_size=dv,
        aux_layer_ids=tuple(aux_ids),
        target_hidden_size=mcfg.hidden_size,
        rms_norm_eps=mcfg.rms_norm_eps,
        rope_theta=float(getattr(mcfg, "rope_theta", None) or 10000.0),
        max_position_embeddings=mcfg.max_position_embeddings,
    )
    head = new_head(hcfg, pick_draft_vocab(examples, dv, mcfg.vocab_size), seed=cfg.seed)
    head.share_embeddings(model.get_input_embeddings())
    stats = train(head, examples, cfg)
    say(
        f"trained {stats['steps']} steps ({stats['epochs_done']:.1f} epochs) in "
        f"{stats['seconds']:.1f}s; loss {stats['first_loss']:.3f} -> {stats['final_loss']:.3f}"
    )
    dtype = getattr(torch, str(getattr(mcfg, "dtype", None) or "float32").removeprefix("torch."))
    save_head(head, out, dtype=dtype if isinstance(dtype, torch.dtype) else None)
    report = FitReport(
        out=str(out),
        seconds_collect=t_collect,
        seconds_train=stats["seconds"],
        steps=stats["steps"],
        epochs_done=stats["epochs_done"],
        final_loss=stats["final_loss"],
        first_loss=stats["first_loss"],
        positions=positions,
        config={**asdict(cfg), "aux_layer_ids": list(aux_ids), "draft_vocab_size": dv},
    )
    for name, texts in (eval_sets or {}).items():
        ev_prompts = [chat_ids(tokenizer, t) for t in texts]
        report.evaluation[name] = evaluate_mal(
            model, head, ev_prompts, k=eval_k, max_tokens=eval_max_tokens, eos_ids=eos
        )
        say(f"evaluation {name}: {json.dumps(report.evaluation[name])}")
    (Path(out) / "fit.json").write_text(json.dumps(asdict(report), indent=2) + "\n")
    return report


def default_fit(
    target: str | Path, out: str | Path, cfg: FitConfig = FitConfig(), log: Any = None
) -> FitReport:
    """The fit the suite relies on: trained on the cpu-tiny prompts' own continuations plus
    ``cfg.num_prompts`` other shipped prompts; judged on the cpu-tiny prompts and, for
    generalisation, on 16 held-out GSM8K prompts used nowhere in training."""
    suite = suite_prompts("cpu-tiny")
    seen = {k for k, _ in suite}
    heldout = pool_prompts(seen, HELDOUT, sets=("gsm8k",))
    extra = pool_prompts(seen | {k for k, _ in heldout}, cfg.num_prompts)
    return fit_head(
        target,
        out,
        cfg,
        train_texts=[t for _, t in suite] + [t for _, t in extra],
        eval_sets={"cpu-tiny": [t for _, t in suite], "held-out": [t for _, t in heldout]},
        log=log,
    )

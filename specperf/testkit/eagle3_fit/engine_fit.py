"""Fit an EAGLE3 head to a target by distillation on the target's own hidden states.

Why: a random head accepts nothing, so it proves plumbing but not acceptance accounting. A head
fitted in about a minute on CPU to the tiny random target accepts well (the target's greedy
continuations are repetitive), which makes MAL a real, checkable number — and lets two independent
EAGLE3 implementations (ours and vLLM's) be compared on the same head.

Recipe (EAGLE3's, scaled down):
1. data: greedy continuations of the target on training prompts (disjoint from the evaluation
   prompts); for every position the fused aux hidden states and the target's argmax ("label").
2. draft vocabulary: the most frequent label tokens (d2t/t2d), as EAGLE3 training picks it.
3. training-time test: the head is unrolled for S steps; step s at position t reads token t+1+s
   and its own previous pre-norm state, attends to the step-0 keys of positions ≤ t plus its own
   keys of steps 1..s at position t (exactly what the KV cache holds during chain drafting), and
   is trained to predict the target's label at t+1+s (cross-entropy on the draft vocabulary,
   weight 0.8^s). Embeddings are the target's, frozen and not saved (vLLM then shares them too).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import functools
import json
import math
import sys
import time
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from specperf.eagle3.checkpoint import new_head, save_head
from specperf.eagle3.config import Eagle3Config, default_aux_layer_ids
from specperf.eagle3.head import Eagle3Head
from specperf.eagle3.sampling import Sampling, TokenSampler
from specperf.eagle3.speculate import Eagle3Speculator, StepInfo
from specperf.eagle3.target import TargetRunner, eos_token_ids

FIT_VERSION = 2  # bump when the recipe's output changes (part of the cache key)
HELDOUT = 16


@dataclass(frozen=True)
class FitConfig:
    """Knobs of one fit; recorded next to the saved head (fit.json)."""

    num_prompts: int = 96  # besides the cpu-tiny prompts
    gen_tokens: int = 64
    context: int = 16  # prompt positions kept per sequence for training
    ttt_steps: int = 3
    epochs: int = 6
    time_budget_s: float = 600.0  # safety cap; epochs decide (deterministic)
    batch_size: int = 16
    lr: float = 1e-2
    weight_decay: float = 0.0
    step_decay: float = 0.8
    draft_vocab_size: int | None = None  # default: half the target vocabulary
    aux_layer_ids: tuple[int, ...] | None = None  # default: EAGLE3's low/mid/high
    intermediate_size: int | None = None  # default: the target's
    seed: int = 0
    threads: int | None = None


@dataclass
class Example:
    ids: torch.Tensor  # (T,) tokens
    aux: torch.Tensor  # (T, n_aux·H) fused-layer inputs
    labels: torch.Tensor  # (T,) target's greedy token t+1 at position t; -1 = no label


@dataclass
class FitReport:
    out: str
    seconds_collect: float
    seconds_train: float
    steps: int
    epochs_done: float
    final_loss: float
    first_loss: float
    positions: int
    config: dict[str, Any]
    evaluation: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------- prompts


def chat_ids(tokenizer: Any, text: str, thinking: bool = False) -> list[int]:
    """Token ids of a one-turn chat prompt, as the servers build it from the chat template (the
    transformers server's own encoder, so the head is fitted on exactly what it will be sent)."""
    from specperf.engines.hf_server import encode_chat

    messages = [{"role": "user", "content": text}]
    return encode_chat(tokenizer, messages, {"enable_thinking": thinking})


def suite_prompts(suite: str = "cpu-tiny") -> list[tuple[str, str]]:
    """(id, first turn) of every prompt a suite's datasets send, at the suite's tier — "the
    cpu-tiny prompts" the fitted head is judged on."""
    from specperf.config import load_suite
    from specperf.datasets import load_dataset

    s = load_suite(suite)
    out: list[tuple[str, str]] = []
    for d in s.datasets:
        ds = load_dataset(d.path or d.name, d.tier or s.tier)
        out.extend((f"{ds.name}:{it.id}", it.turns[0]) for it in ds.items)
    return out


def pool_prompts(exclude: set[str], n: int, sets: Sequence[str] = ("gsm8k", "mt-bench")) -> list:
    """(id, first turn) of up to ``n`` shipped prompts not in ``exclude``, hash-ranked."""
    from specperf.datasets import load_dataset

    items = [
        (f"{name}:{it.id}", it.turns[0])
        for name in sets
        for it in load_dataset(name).items
        if f"{name}:{it.id}" not in exclude
    ]
    items.sort(key=lambda kv: hash_rank(kv[0]))
    return items[:n]


def hash_rank(text: str) -> str:
    import hashlib

    return hashlib.sha256(f"fit:{text}".encode()).hexdigest()


# ---------------------------------------------------------------- data


@torch.inference_mode()
def collect(
    model: Any,
    prompts: Sequence[list[int]],
    aux_layer_ids: Sequence[int],
    gen_tokens: int,
    eos_ids: set[int],
    *,
    pad_id: int,
    context: int,
    batch_size: int = 32,
) -> list[Example]:
    """Greedy continuations (batched ``generate``, left padding) with the hidden states it
    computed anyway. Label of position t = the target's greedy token t+1, so positions from the
    last prompt token on are labelled; the ``context`` prompt positions before it are kept as
    attention context only (label -1)."""
    dev = next(model.parameters()).device
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))  # little padding
    out: list[Example] = []
    for i in range(0, len(order), batch_size):
        group = [prompts[j] for j in order[i : i + batch_size]]
        width = max(len(p) for p in group)
        ids = torch.full((len(group), width), pad_id, dtype=torch.long)
        mask = torch.zeros((len(group), width), dtype=torch.long)
        for r, p in enumerate(group):
            ids[r, width - len(p) :] = torch.tensor(p)
            mask[r, width - len(p) :] = 1
        res = model.generate(
            input_ids=ids.to(dev),
            attention_mask=mask.to(dev),
            max_new_tokens=gen_tokens,
            do_sample=False,
            pad_token_id=pad_id,
            eos_token_id=sorted(eos_ids),
            return_dict_in_generate=True,
            output_hidden_states=True,
        )
        seqs = res.sequences.cpu()
        steps = res.hidden_states  # [prefill (L+1)×(B,W,H), then per step (L+1)×(B,1,H)]
        aux = torch.cat(
            [torch.cat([st[k] for k in aux_layer_ids], dim=-1) for st in steps], dim=1
        ).float()
        aux = aux.cpu()
        for r, p in enumerate(group):
            cont = seqs[r, width:].tolist()
            for j, t in enumerate(cont):
                if t in eos_ids:
                    cont = cont[: j + 1]
                    break
            lo = width - min(len(p), context + 1)
            hi = width + len(cont) - 1  # hidden states exist up to the second-last token
            seq = seqs[r, lo : hi + 1]
            labels = torch.full((hi - lo,), -1, dtype=torch.long)
            first_labelled = width - 1 - lo
            labels[first_labelled:] = seq[first_labelled + 1 :]
            out.append(Example(ids=seq[:-1].clone(), aux=aux[r, lo:hi].clone(), labels=labels))
    return out


def pick_draft_vocab(examples: Sequence[Example], size: int, vocab: int) -> torch.Tensor:
    """The ``size`` most frequent label tokens (ties by id), ascending; padded by id."""
    counts: collections.Counter[int] = collections.Counter()
    for ex in examples:
        counts.update(t for t in ex.labels.tolist() if t >= 0)
    chosen = [t for t, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:size]]
    keep = set(chosen)
    t = 0
    while len(keep) < size and t < vocab:
        keep.add(t)
        t += 1
    return torch.tensor(sorted(keep), dtype=torch.long)


# ---------------------------------------------------------------- training-time test


def _expand_kv(x: torch.Tensor, groups: int) -> torch.Tensor:
    return x if groups == 1 else x.repeat_interleave(groups, dim=1)


def ttt_loss(
    head: Eagle3Head,
    ids: torch.Tensor,
    aux: torch.Tensor,
    targets: torch.Tensor,
    valid: torch.Tensor,
    steps: int,
    decay: float,
) -> torch.Tensor:
    """Unrolled multi-step loss over a padded batch (B, T): cross-entropy against the target's
    greedy token as a draft-vocabulary index (``targets`` (B, T), -100 = none). Hard labels,
    not the target's soft distribution: a random target's distribution is nearly flat, and
    greedy acceptance only asks for its argmax."""
    b, t = ids.shape
    attn = head.midlayer.self_attn
    groups = attn.num_heads // attn.num_kv
    scale = 1.0 / math.sqrt(attn.head_dim)
    hidden = head.fuse(aux)
    pos = torch.arange(t, device=ids.device)
    causal = pos[None, :] <= pos[:, None]  # (T, T) key j visible to query t
    k0 = v0 = None
    diag_k: list[torch.Tensor] = []
    diag_v: list[torch.Tensor] = []
    total = torch.zeros((), device=ids.device)
    weight_sum = 0.0
    for s in range(steps):
        # inputs: token t+1+s, state: fused target (s=0) or own pre-norm of the previous step
        tok = torch.zeros_like(ids)
        tok[:, : t - 1 - s] = ids[:, 1 + s :]
        embeds = head.embed(tok).to(hidden.dtype)
        x, residual = head.midlayer.attn_input(embeds, hidden)
        cos, sin = head.rope(pos + s)
        q, k, v = attn.qkv(x, cos, sin)
        if s == 0:
            k0, v0 = k, v
            scores = torch.einsum("bhqd,bhkd->bhqk", q, _expand_kv(k, groups)) * scale
            scores = scores.masked_fill(~causal, float("-inf"))
            w = scores.softmax(-1)
            out = torch.einsum("bhqk,bhkd->bhqd", w, _expand_kv(v, groups))
        else:
            assert k0 is not None and v0 is not None
            diag_k.append(k)
            diag_v.append(v)
            s0 = torch.einsum("bhqd,bhkd->bhqk", q, _expand_kv(k0, groups)) * scale
            s0 = s0.masked_fill(~causal, float("-inf"))
            sd = torch.stack(
                [(q * _expand_kv(dk, groups)).sum(-1) * scale for dk in diag_k], dim=-1
            )  # (B, nh, T, s)
            w = torch.cat([s0, sd], dim=-1).softmax(-1)
            out = torch.einsum("bhqk,bhkd->bhqd", w[..., :t], _expand_kv(v0, groups))
            for r, dv in enumerate(diag_v):
                out = out + w[..., t + r : t + r + 1] * _expand_kv(dv, groups)
        o = attn.o_proj(out.transpose(1, 2).reshape(b, t, -1))
        pre = head.midlayer.finish(o, residual)
        logits = head.logits(head.norm(pre))
        # target of position t at step s: the target's distribution at position t+1+s
        n = t - 1 - s
        if n > 0:
            lab = targets[:, 1 + s :].clone()
            lab[~(valid[:, :n] & valid[:, 1 + s :])] = -100
            if (lab >= 0).any():
                loss = cross_entropy(
                    logits[:, :n].reshape(-1, logits.shape[-1]).float(), lab.reshape(-1)
                )
                total = total + (decay**s) * loss
                weight_sum += decay**s
        hidden = pre
    return total / max(weight_sum, 1e-9)


def cross_entropy(
    logits: torch.Tensor, labels: torch.Tensor, manual: bool | None = None
) -> torch.Tensor:
    """Mean cross-entropy over the labels that are not -100. On CPU ``F.cross_entropy`` (the
    tiny fit's recipe, bit for bit); on a GPU log-softmax + gather, because CUDA's NLLLoss has no
    deterministic implementation (``torch.use_deterministic_algorithms(True)`` refuses it) while
    gather's backward has one. ``manual`` forces either (tests)."""
    if manual is None:
        manual = logits.device.type != "cpu"
    if not manual:
        return F.cross_entropy(logits, labels, ignore_index=-100)
    keep = labels >= 0
    picked = logits.log_softmax(-1).gather(-1, labels.clamp(min=0)[:, None])[:, 0]
    return -(picked * keep).sum() / keep.sum()


def _batches(
    examples: Sequence[Example],
    batch_size: int,
    gen: torch.Generator,
    to_draft: torch.Tensor,
    device: torch.device | None = None,
) -> list[tuple[torch.Tensor, ...]]:
    """Padded batches: ids, aux, draft-vocabulary label index (-100: none), valid — built on
    ``device`` (default CPU) from examples that may live there already."""
    order = torch.randperm(len(examples), generator=gen).tolist()
    out = []
    for i in range(0, len(order), batch_size):
        group = [examples[j] for j in order[i : i + batch_size]]
        t = max(len(e.ids) for e in group)
        b = len(group)
        ids = torch.zeros(b, t, dtype=torch.long, device=device)
        aux = torch.zeros(b, t, group[0].aux.shape[-1], device=device)
        targets = torch.full((b, t), -100, dtype=torch.long, device=device)
        valid = torch.zeros(b, t, dtype=torch.bool, device=device)
        for r, e in enumerate(group):
            n = len(e.ids)
            labels = e.labels.to(to_draft.device)
            ids[r, :n], aux[r, :n], valid[r, :n] = e.ids, e.aux, True
            targets[r, :n] = to_draft[labels.clamp(min=0)]
            targets[r, :n][labels < 0] = -100
        out.append((ids, aux, targets, valid))
    return out


def train(head: Eagle3Head, examples: Sequence[Example], cfg: FitConfig) -> dict[str, Any]:
    """AdamW over the head (embeddings excluded) for ``epochs``; exceeding ``time_budget_s``
    is an error, not an early stop (the head's identity is its recipe, not the clock)."""
    gen = torch.Generator().manual_seed(cfg.seed)
    params = [p for n, p in head.named_parameters() if not n.startswith("embed_tokens")]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    draft_ids = torch.arange(head.cfg.draft_vocab_size) + head.d2t.cpu()
    to_draft = torch.full((head.cfg.vocab_size,), -100, dtype=torch.long)  # target → draft id
    to_draft[draft_ids] = torch.arange(head.cfg.draft_vocab_size)
    n_batches = math.ceil(len(examples) / cfg.batch_size)
    total_steps = cfg.epochs * n_batches
    sched = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=cfg.lr, total_steps=total_steps, pct_start=0.1
    )
    started = time.monotonic()
    losses: list[float] = []
    steps = 0
    head.train()
    dev = head.fc.weight.device
    to_draft = to_draft.to(dev)
    for _epoch in range(cfg.epochs):
        for ids, aux, targets, valid in _batches(examples, cfg.batch_size, gen, to_draft, dev):
            loss = ttt_loss(head, ids, aux, targets, valid, cfg.ttt_steps, cfg.step_decay)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            sched.step()
            losses.append(float(loss.item()))
            steps += 1
            if time.monotonic() - started > cfg.time_budget_s:
                # Never store a head trained for fewer steps under the same recipe digest: its
                # bits (and MAL) would depend on the machine's speed, not on the recipe.
                from specperf.errors import SpecperfError

                raise SpecperfError(
                    f"EAGLE3 fit: {steps} of {total_steps} steps took longer than the "
                    f"{cfg.time_budget_s:.0f} s safety cap; the head would depend on this "
                    "machine's speed, so none is stored (a starved or very slow machine?)"
                )
    head.eval()
    return {
        "steps": steps,
        "epochs_done": steps / n_batches,
        "first_loss": losses[0] if losses else float("nan"),
        "final_loss": sum(losses[-n_batches:]) / max(1, len(losses[-n_batches:])),
        "seconds": time.monotonic() - started,
    }


# ---------------------------------------------------------------- evaluation


def evaluate_mal(
    model: Any,
    head: Eagle3Head,
    prompts: Sequence[list[int]],
    *,
    k: int,
    max_tokens: int,
    eos_ids: set[int],
) -> dict[str, Any]:
    """Greedy EAGLE3 decoding of every prompt; MAL and per-position acceptance as design.md."""
    runner = TargetRunner(model, aux_layer_ids=head.cfg.aux_layer_ids, cache="dynamic")
    spec = Eagle3Speculator(runner, head, k, timing=False)
    drafts = accepted = tokens = 0
    per_pos = [0] * k

    def on_step(info: StepInfo) -> None:
        nonlocal drafts, accepted, tokens
        tokens += len(info.tokens)
        if info.drafted:
            drafts += 1
            accepted += info.accepted
            for i in range(info.accepted):
                per_pos[i] += 1

    for p in prompts:
        spec.generate(p, max_tokens, TokenSampler(Sampling()), eos_ids, on_step)
    return {
        "prompts": len(prompts),
        "k": k,
        "max_tokens": max_tokens,
        "drafts": drafts,
        "accepted": accepted,
        "output_tokens": tokens,
        "mean_acceptance_length": 1 + accepted / drafts if drafts else None,
        "acceptance_rate": accepted / (drafts * k) if drafts else None,
        "per_position_acceptance": [a / drafts for a in per_pos] if drafts else None,
    }


# ---------------------------------------------------------------- driver


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


DEFAULT_CFG = FitConfig(threads=1)  # one thread: the same head from one build to the next


@functools.lru_cache(maxsize=8)
def fitted_head_key(target_name: str, cfg: FitConfig = DEFAULT_CFG) -> str:
    """The fitted head's recipe digest: the target's (its directory name carries the tiny
    recipe's digest), the fit's knobs and version, and the training/evaluation prompts. It names
    the cache directory and identifies the head in fingerprints (its weights differ in low bits
    between instruction sets, so they are never hashed for that)."""
    import hashlib

    prompts = hashlib.sha256(
        json.dumps(suite_prompts("cpu-tiny"), sort_keys=True).encode()
    ).hexdigest()
    blob = {"target": target_name, "fit": asdict(cfg), "version": FIT_VERSION, "prompts": prompts}
    return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()[:12]


def ensure_fitted_head(target: str | Path | None = None, log: Any = None) -> Path:
    """The fitted tiny head, built on first use and cached beside the tiny model
    (``<tiny model>-eagle3-fit-<key>``; atomic, under a file lock). Built with fixed seeds, one
    thread and deterministic algorithms, so two builds on one machine give the same weights."""
    import os
    import shutil

    from filelock import FileLock

    from specperf.testkit.models import ensure_tiny_model

    target = Path(target or ensure_tiny_model())
    cfg = DEFAULT_CFG
    out = target.parent / f"{target.name}-eagle3-fit-{fitted_head_key(target.name, cfg)}"
    with FileLock(str(target.parent / f".{out.name}.lock")):
        if (out / "fit.json").exists():
            return out
        tmp = target.parent / f".{out.name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        threads, deterministic = (
            torch.get_num_threads(),
            torch.are_deterministic_algorithms_enabled(),
        )
        try:
            torch.use_deterministic_algorithms(True)
            default_fit(target, tmp, cfg, log=log)
            tmp.rename(out)
        finally:
            torch.use_deterministic_algorithms(deterministic)
            torch.set_num_threads(threads)
            shutil.rmtree(tmp, ignore_errors=True)
    return out


# ---------------------------------------------------------------- the engine path (GPU)
#
# A random-weight target of a real shape (the h200-transformers suite: Qwen3-8B's shape, vocab
# 151936) has near-tied top logits, so another kernel schedule — batched eager ``generate()``
# instead of the served, compiled verify step — picks another greedy token within a few tokens
# (measured on the H200: compiled and eager differed at token 1). A head distilled on
# ``generate()``'s continuations would then be judged on continuations it never saw. So this fit
# takes its data from the ENGINE's own path: the server's start-up code
# (``hf_server.start_backend``) builds target and EAGLE3 backend with the suite's own server
# arguments (same random weights, same compiled-vs-eager decision), drafts come from a random
# head (they are rejected, so every verify step commits the target's own greedy token), and the
# fused aux states are the very rows the served verify step hands the head. Prompts are exactly
# the suite's measured first turns (its request plan), so the head is fitted TO the suite's
# prompts, as the tiny head is (docs/transformers.md); held-out prompts give its generalisation.

ENGINE_FIT_VERSION = 1
_DROP_ARGS = {"--host": 1, "--port": 1, "--draft-model": 1, "--threads": 1}
_DROP_FLAGS = {"--draft-random-weights"}


@dataclass(frozen=True)
class EngineFitConfig:
    """Knobs of an engine-path fit (part of its recipe digest). Training is full-batch AdamW
    (the data is a few thousand positions), linear warm-up then cosine to lr/10, stopped at
    ``steps`` or once the loss is <= ``stop_loss``; no time cap, so the result is decided by
    the recipe (and deterministic where the data and the kernels are)."""

    steps: int = 400
    lr: float = 3e-4
    warmup: int = 20
    stop_loss: float = 0.05
    weight_decay: float = 0.0
    ttt_steps: int = 3
    step_decay: float = 0.8
    seed: int = 0
    heldout: int = 4  # unmeasured prompts of the suite's sets (generalisation figure only)
    tf32: bool = True  # TF32 matmuls while training (deterministic, several times fp32's rate)
    # a run that diverges (loss not finite, or not below 0.9 x its first) is redone from scratch
    # at the next lr; the lowest final loss is kept (a rule of the recipe, so still decided)
    lr_fallbacks: tuple[float, ...] = (1e-4,)


def train_full_batch(
    head: Eagle3Head, examples: Sequence[Example], cfg: EngineFitConfig, lr: float
) -> dict[str, Any]:
    """Full-batch training-time-test AdamW (embeddings excluded) on the head's device."""
    dev = head.fc.weight.device
    params = [p for n, p in head.named_parameters() if not n.startswith("embed_tokens")]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=cfg.weight_decay)
    draft_ids = torch.arange(head.cfg.draft_vocab_size) + head.d2t.cpu()
    to_draft = torch.full((head.cfg.vocab_size,), -100, dtype=torch.long)
    to_draft[draft_ids] = torch.arange(head.cfg.draft_vocab_size)
    gen = torch.Generator().manual_seed(cfg.seed)
    ((ids, aux, targets, valid),) = _batches(
        examples, max(1, len(examples)), gen, to_draft.to(dev), dev
    )
    started = time.monotonic()
    losses: list[float] = []
    head.train()
    for step in range(cfg.steps):
        if step < cfg.warmup:
            scale = (step + 1) / cfg.warmup
        else:
            frac = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
            scale = 0.1 + 0.45 * (1 + math.cos(math.pi * frac))
        for group in opt.param_groups:
            group["lr"] = lr * scale
        loss = ttt_loss(head, ids, aux, targets, valid, cfg.ttt_steps, cfg.step_decay)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        losses.append(float(loss.item()))
        if not math.isfinite(losses[-1]) or losses[-1] <= cfg.stop_loss:
            break
    head.eval()
    return {
        "steps": len(losses),
        "first_loss": losses[0],
        "final_loss": losses[-1],
        "seconds": time.monotonic() - started,
        "loss_every_10": [round(v, 4) for v in losses[::10]],
    }


@dataclass
class EnginePlan:
    """What an engine-path fit takes from a suite: the served target and its server arguments,
    the measured prompts (chat messages) and the sampling they are sent with."""

    server_args: list[str]  # hf_server argv less host/port/draft/threads
    target: str
    target_identity: str | None
    tokenizer: str
    prompts: list[list[dict[str, str]]]
    heldout: list[list[dict[str, str]]]
    chat_kwargs: dict[str, Any]
    max_tokens: int
    ignore_eos: bool
    k: int


def engine_fit_plan(
    suite: str, settings: dict[str, str] | None = None, method: str = "eagle3", heldout: int = 4
) -> EnginePlan:
    """The fit plan of a suite's EAGLE3 items (method name ``method``) on the transformers
    engine: the first turns of every measured conversation, in the workload's request plan."""
    from specperf import datasets
    from specperf.config import load_suite
    from specperf.engines.base import Devices
    from specperf.engines.transformers import build_command
    from specperf.errors import ConfigError
    from specperf.modelid import model_identity
    from specperf.workload import _messages, plan_requests

    s = load_suite(suite, settings or {})
    items = [it for it in s.items() if it.key.method == method]
    if not items:
        raise ConfigError(f"{suite}: no items of method {method!r}")
    spec = items[0].spec
    if spec.kind != "transformers" or spec.method != "eagle3":
        raise ConfigError(
            f"{suite}: {method} is {spec.kind}/{spec.method}, not transformers/eagle3"
        )
    argv = build_command(spec, 0, Devices())[3:]  # less python -m module
    server_args: list[str] = []
    skip = 0
    for a in argv:
        if skip:
            skip -= 1
        elif a in _DROP_ARGS:
            skip = _DROP_ARGS[a]
        elif a not in _DROP_FLAGS:
            server_args.append(a)
    samplings = {it.sampling for it in items}
    if len(samplings) != 1:
        raise ConfigError(f"{suite}: {method} items use several samplings; fit one at a time")
    (sp,) = samplings
    if sp.temperature > 0:
        raise ConfigError(f"{suite}: the engine-path fit distils greedy continuations (temp 0)")
    prompts: list[list[dict[str, str]]] = []
    held: list[list[dict[str, str]]] = []
    seen: set[str] = set()
    for it in items:
        name, path = it.key.dataset, it.dataset.path
        if path and name not in datasets.list_datasets():
            ds = datasets.load_dataset(path, tier=it.tier)
        else:
            ds = datasets.load_dataset(name, tier=it.tier, path=path)
        plan, _order, _rep, unmeasured = plan_requests(
            ds.items, it.workload.num_requests, it.workload.seed
        )
        for conv in plan:  # first turns only: later turns carry the engine's own answers
            if f"{name}:{conv.item.id}" not in seen:
                seen.add(f"{name}:{conv.item.id}")
                prompts.append(
                    [*_messages(conv.item), {"role": "user", "content": conv.item.turns[0]}]
                )
        warm = it.workload.warmup_requests
        warm = max(1, it.workload.concurrency) if warm is None else warm
        for w in unmeasured[warm : warm + heldout]:  # past the warm-up prompts
            if len(held) < heldout:
                held.append([*_messages(w), {"role": "user", "content": w.turns[0]}])
    return EnginePlan(
        server_args=server_args,
        target=spec.model,
        target_identity=model_identity(spec.model, items[0].model_revision),
        tokenizer=spec.tokenizer or spec.model,
        prompts=prompts,
        heldout=held,
        chat_kwargs={"enable_thinking": sp.thinking},
        max_tokens=sp.max_tokens,
        ignore_eos=sp.ignore_eos,
        k=int(spec.num_speculative_tokens or 0),
    )


def _prompt_ids(plan: EnginePlan, tokenizer: Any) -> tuple[list[list[int]], list[list[int]]]:
    from specperf.engines.hf_server import encode_chat

    def enc(msgs: list[dict[str, str]]) -> list[int]:
        return encode_chat(tokenizer, msgs, dict(plan.chat_kwargs))

    return [enc(m) for m in plan.prompts], [enc(m) for m in plan.heldout]


def engine_fit_digest(
    plan: EnginePlan, head_shape: dict[str, Any], cfg: EngineFitConfig, tokenizer: Any
) -> str:
    """Recipe digest of an engine-path fit: target identity (never a path), the server
    arguments (paths masked), the head's shape, the prompts' token ids, length and K, the fit's
    knobs and version. It names the cache directory and is the head's identity in fingerprints
    (``fit:<name>@<digest>``): what the fit is made FROM, not its weights' bytes."""
    import hashlib

    from specperf.modelid import portable

    train, held = _prompt_ids(plan, tokenizer)
    blob = {
        "version": ENGINE_FIT_VERSION,
        "target": plan.target_identity,
        "server_args": [portable(a) for a in plan.server_args],
        "head_shape": head_shape,
        "prompts": hashlib.sha256(json.dumps([train, held]).encode()).hexdigest(),
        "max_tokens": plan.max_tokens,
        "ignore_eos": plan.ignore_eos,
        "k": plan.k,
        "fit": asdict(cfg),
    }
    return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()[:12]


def collect_engine_path(
    backend: Any, prompts: Sequence[list[int]], max_tokens: int, eos: set[int]
) -> tuple[list[Example], list[list[int]]]:
    """Greedy continuations of every prompt through ``backend`` (an ``Eagle3Backend``) and, per
    position, the fused aux row its target step produced: the prompt's rows from the prefill,
    each later position's from the verify step that committed it (row 0 of the block, or rows
    0..m when m drafts were accepted). Example labels: the next token from the last prompt
    position on (-1 before). Returns the examples and the continuations."""
    runner, spec = backend.runner, backend.spec
    served = runner.forward
    last: dict[str, Any] = {}

    def forward(ids: torch.Tensor, *, use_compiled: bool = False) -> Any:
        start = runner.length
        logits, aux = served(ids, use_compiled=use_compiled)
        last["start"], last["aux"] = start, aux
        return logits, aux

    runner.forward = forward  # an instance attribute shadows the method
    examples: list[Example] = []
    conts: list[list[int]] = []
    try:
        for p in prompts:
            n = len(p)
            size = n + max_tokens + spec.k + 1
            rows: list[torch.Tensor | None] = [None] * size
            tokens: list[int] = []

            def on_step(info: StepInfo, rows: list = rows, tokens: list = tokens) -> None:
                start, aux = last["start"], last["aux"]
                used = info.accepted + 1 if info.drafted else aux.shape[0]
                for j in range(used):
                    rows[start + j] = aux[j]
                tokens.extend(info.tokens)

            spec.generate(p, max_tokens, TokenSampler(Sampling(), backend.device), eos, on_step)
            seq = list(p) + tokens
            m = len(seq) - 1  # positions with a next token
            missing = [i for i in range(m) if rows[i] is None]
            if missing:
                raise RuntimeError(
                    f"engine-path collection: no aux row for positions {missing[:5]}"
                )
            with torch.inference_mode(False):
                aux_rows = torch.stack([r.float() for r in rows[:m]]).clone()  # type: ignore[union-attr]
                labels = torch.full((m,), -1, dtype=torch.long)
                labels[n - 1 :] = torch.tensor(seq[n:], dtype=torch.long)
                examples.append(
                    Example(
                        ids=torch.tensor(seq[:-1], dtype=torch.long), aux=aux_rows, labels=labels
                    )
                )
            conts.append(tokens)
    finally:
        del runner.forward
    return examples, conts


def evaluate_engine_path(
    backend: Any,
    head: Eagle3Head,
    prompts: Sequence[list[int]],
    max_tokens: int,
    eos: set[int],
    expected: Sequence[list[int]] | None = None,
) -> dict[str, Any]:
    """Greedy EAGLE3 decoding with ``head`` on the backend's served target path: MAL and
    per-position acceptance as the engine's counters count them, and how many continuations
    equal ``expected`` (the collection's: the served path reproduces itself)."""
    spec = Eagle3Speculator(
        backend.runner, head, backend.spec.k, use_compiled=backend.spec.use_compiled, timing=False
    )
    k = spec.k
    drafts = accepted = tokens = same = 0
    per_pos = [0] * k
    for i, p in enumerate(prompts):
        out: list[int] = []

        def on_step(info: StepInfo, out: list = out) -> None:
            nonlocal drafts, accepted, tokens
            out.extend(info.tokens)
            tokens += len(info.tokens)
            if info.drafted:
                drafts += 1
                accepted += info.accepted
                for j in range(info.accepted):
                    per_pos[j] += 1

        spec.generate(p, max_tokens, TokenSampler(Sampling(), backend.device), eos, on_step)
        same += int(expected is not None and out == list(expected[i]))
    return {
        "prompts": len(prompts),
        "k": k,
        "max_tokens": max_tokens,
        "drafts": drafts,
        "accepted": accepted,
        "output_tokens": tokens,
        "mean_acceptance_length": 1 + accepted / drafts if drafts else None,
        "per_position_acceptance": [a / drafts for a in per_pos] if drafts else None,
        "continuations_equal_collection": same if expected is not None else None,
    }


@contextlib.contextmanager
def deterministic_training(tf32: bool) -> Any:
    """``torch.use_deterministic_algorithms(True)`` (warn-only: an op without a deterministic
    implementation is recorded, not fatal — the yielded list gets the warnings), optional TF32;
    the previous settings come back afterwards (the served path was compiled without them)."""
    prev = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        torch.backends.cuda.matmul.allow_tf32,
    )
    seen: list[str] = []
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield seen
        seen.extend(sorted({str(w.message)[:300] for w in caught}))
    finally:
        torch.use_deterministic_algorithms(prev[0], warn_only=prev[1])
        torch.backends.cuda.matmul.allow_tf32 = prev[2]


def data_digests(model: Any, examples: Sequence[Example], conts: Sequence[list[int]]) -> dict:
    """sha256 of the collected continuations, of the aux rows (fp32 bytes) and of a sample of
    the target's weights (the first 65536 values of its embeddings, first and last parameter):
    two fits of one recipe whose weights differ say here whether the target, the greedy tokens
    or only the aux rows' low bits differed."""
    import hashlib

    def digest(chunks: Any) -> str:
        h = hashlib.sha256()
        for c in chunks:
            h.update(c)
        return h.hexdigest()

    params = list(model.parameters())
    sample = [model.get_input_embeddings().weight, params[0], params[-1]]
    return {
        "continuations": digest([json.dumps([list(c) for c in conts]).encode()]),
        "aux": digest(e.aux.detach().float().cpu().numpy().tobytes() for e in examples),
        "target_sample": digest(
            t.detach().flatten()[:65536].float().cpu().numpy().tobytes() for t in sample
        ),
    }


def _safe_digests(model: Any, examples: Sequence[Example], conts: Sequence[list[int]]) -> Any:
    try:
        return data_digests(model, examples, conts)
    except Exception as exc:  # a diagnostic must not cost the fit
        return f"failed: {exc!r}"[:300]


def _sha256(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 24), b""):
            h.update(block)
    return h.hexdigest()


def fit_engine_head(
    plan: EnginePlan,
    head_shape: str | Path,
    out: str | Path,
    cfg: EngineFitConfig = EngineFitConfig(),
    log: Any = None,
) -> dict[str, Any]:
    """Collect on the engine path, train (deterministic), save (published format, the served
    dtype) + fit.json, evaluate MAL on the suite prompts and the held-out ones. Returns fit.json."""
    import os

    from specperf.eagle3.checkpoint import load_head
    from specperf.eagle3.config import load_config
    from specperf.engines import hf_server

    def say(msg: str) -> None:
        if log is not None:
            print(msg, file=log, flush=True)

    t0 = time.monotonic()
    argv = [*plan.server_args, "--port", "0", "--draft-model", str(head_shape)]
    args = hf_server.parse_args([*argv, "--draft-random-weights"])
    if args.threads:
        torch.set_num_threads(args.threads)
    tokenizer, backend, loaded = hf_server.start_backend(args)
    model = backend.model
    t_start = time.monotonic() - t0
    say(f"engine path up in {t_start:.1f}s: fast path {backend.fast_path}")
    train_ids, held_ids = _prompt_ids(plan, tokenizer)
    eos = set() if plan.ignore_eos else set(backend.eos)

    t1 = time.monotonic()
    examples, conts = collect_engine_path(backend, train_ids, plan.max_tokens, eos)
    t_collect = time.monotonic() - t1
    positions = sum(len(e.ids) for e in examples)
    say(f"collected {len(examples)} continuations, {positions} positions in {t_collect:.1f}s")

    mcfg = model.config
    hcfg = load_config(head_shape, mcfg.num_hidden_layers)
    vocab = pick_draft_vocab(examples, hcfg.draft_vocab_size, mcfg.vocab_size)
    tries: list[dict[str, Any]] = []
    best: tuple[Eagle3Head, dict[str, Any]] | None = None
    for lr in (cfg.lr, *cfg.lr_fallbacks):
        torch.manual_seed(cfg.seed)
        head = new_head(hcfg, vocab, seed=cfg.seed).to(backend.device)
        head.share_embeddings(model.get_input_embeddings())
        with deterministic_training(cfg.tf32) as nondeterministic:
            stats = train_full_batch(head, examples, cfg, lr)
        stats = {"lr": lr, **stats, "nondeterministic_ops": nondeterministic}
        tries.append(stats)
        say(
            f"trained {stats['steps']} steps at lr {lr:g} in {stats['seconds']:.1f}s; loss "
            f"{stats['first_loss']:.3f} -> {stats['final_loss']:.3f}"
        )
        ok = math.isfinite(stats["final_loss"])
        if ok and (best is None or stats["final_loss"] < best[1]["final_loss"]):
            best = (head, stats)
        del head
        if ok and stats["final_loss"] < 0.9 * stats["first_loss"]:
            break
    if best is None:
        raise RuntimeError(f"engine-path fit diverged at every lr: {tries}")
    head, stats = best
    dtype = next(model.parameters()).dtype
    save_head(head, out, dtype=dtype)
    del head
    weights = Path(out) / "model.safetensors"
    report: dict[str, Any] = {
        "kind": "engine-path",
        "version": ENGINE_FIT_VERSION,
        "config": asdict(cfg),
        "server_args": plan.server_args,
        "target_identity": plan.target_identity,
        "prompts": len(train_ids),
        "heldout_prompts": len(held_ids),
        "max_tokens": plan.max_tokens,
        "positions": positions,
        "fast_path": backend.fast_path,
        "loaded": loaded,
        "seconds": {
            "start_engine_path": round(t_start, 2),
            "collect": round(t_collect, 2),
            "train": round(sum(t["seconds"] for t in tries), 2),
        },
        "lr": stats["lr"],
        "steps": stats["steps"],
        "first_loss": stats["first_loss"],
        "final_loss": stats["final_loss"],
        "tries": tries,
        "nondeterministic_ops": sorted({w for t in tries for w in t["nondeterministic_ops"]}),
        "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
        "weights_sha256": _sha256(weights),
        # what the head was trained on, to tell where two fits of one recipe part ways
        "data_sha256": _safe_digests(model, examples, conts),
        "weights_bytes": weights.stat().st_size,
        "versions": {"torch": torch.__version__, **loaded.get("versions", {})},
        "evaluation": {},
    }
    try:
        import transformers

        report["versions"]["transformers"] = transformers.__version__
    except ImportError:  # pragma: no cover - the fit needs transformers anyway
        pass
    if torch.cuda.is_available() and backend.device.type == "cuda":
        report["device_name"] = torch.cuda.get_device_name(backend.device)
    t2 = time.monotonic()
    served = load_head(
        out,
        num_target_layers=mcfg.num_hidden_layers,
        target_vocab_size=mcfg.vocab_size,
        target_hidden_size=mcfg.hidden_size,
        device=backend.device,
        dtype=dtype,
    )
    for name, ids, expected in (("suite", train_ids, conts), ("held-out", held_ids, None)):
        if ids:
            ev = evaluate_engine_path(backend, served, ids, plan.max_tokens, eos, expected)
            report["evaluation"][name] = ev
            say(f"evaluation {name}: {json.dumps(ev)}")
    report["seconds"]["evaluate"] = round(time.monotonic() - t2, 2)
    report["seconds"]["total"] = round(time.monotonic() - t0, 2)
    (Path(out) / "fit.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    return report


def ensure_engine_fitted_head(
    plan: EnginePlan,
    head_shape: str | Path,
    out_root: str | Path,
    name: str,
    cfg: EngineFitConfig = EngineFitConfig(),
    log: Any = None,
    digest_only: bool = False,
) -> dict[str, Any]:
    """The engine-path head for ``plan``, cached as ``<out_root>/<name>-<digest>`` (atomic,
    under a file lock). Returns {path, digest, identity, cached, fit}."""
    import os
    import shutil

    from filelock import FileLock
    from transformers import AutoTokenizer

    shape = json.loads((Path(head_shape) / "config.json").read_text())
    tokenizer = AutoTokenizer.from_pretrained(plan.tokenizer)
    digest = engine_fit_digest(plan, shape, cfg, tokenizer)
    root = Path(out_root)
    out = root / f"{name}-{digest}"
    info: dict[str, Any] = {
        "path": str(out),
        "digest": digest,
        "identity": f"fit:{name}@{digest}",
        "cached": (out / "fit.json").exists(),
    }
    if digest_only:
        return info
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root / f".{out.name}.lock")):
        if not (out / "fit.json").exists():
            tmp = root / f".{out.name}.tmp-{os.getpid()}"
            shutil.rmtree(tmp, ignore_errors=True)
            try:
                fit_engine_head(plan, head_shape, tmp, cfg, log=log)
                tmp.rename(out)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    info["fit"] = json.loads((out / "fit.json").read_text())
    return info


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m specperf.eagle3.fit",
        description="Fit an EAGLE3 head to the tiny target by self-distillation on CPU "
        "(prints the evaluation JSON, then the head's path).",
    )
    ap.add_argument("--target", default=None, help="target model dir (default: the tiny model)")
    ap.add_argument(
        "--out", type=Path, default=None, help="head directory (default: the shared cache)"
    )
    ap.add_argument("--epochs", type=int, default=FitConfig.epochs)
    ap.add_argument("--threads", type=int, default=1)
    eng = ap.add_argument_group(
        "engine path (a suite's EAGLE3 item on the transformers engine, e.g. on a GPU)"
    )
    eng.add_argument("--suite", default=None, help="fit on this suite's engine path")
    eng.add_argument("--setting", action="append", default=[], help="KEY=VALUE (repeatable)")
    eng.add_argument("--method", default="eagle3", help="the suite's EAGLE3 method name")
    eng.add_argument("--head-shape", type=Path, help="directory whose config.json is the head's")
    eng.add_argument("--out-root", type=Path, help="cache folder (<name>-<digest> inside)")
    eng.add_argument("--name", default="eagle3-fit")
    eng.add_argument("--steps", type=int, default=EngineFitConfig.steps)
    eng.add_argument("--lr", type=float, default=EngineFitConfig.lr)
    eng.add_argument("--json", type=Path, default=None, help="write the result here too")
    eng.add_argument("--digest-only", action="store_true", help="print the recipe digest only")
    args = ap.parse_args(argv)
    if args.suite:
        import os

        settings = dict(kv.split("=", 1) for kv in args.setting)
        ecfg = EngineFitConfig(steps=args.steps, lr=args.lr)
        if not args.head_shape or not args.out_root:
            ap.error("--suite needs --head-shape and --out-root")
        plan = engine_fit_plan(args.suite, settings, args.method, ecfg.heldout)
        if not args.digest_only:
            # before CUDA starts: cuBLAS reads it once (the suite gives the engine the same)
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        info = ensure_engine_fitted_head(
            plan, args.head_shape, args.out_root, args.name, ecfg, sys.stderr, args.digest_only
        )
        text = json.dumps(info, indent=2, default=str)
        if args.json:
            args.json.write_text(text + "\n")
        print(text)
        return 0
    if args.out is None:
        path = ensure_fitted_head(args.target, log=sys.stderr)
    else:
        from specperf.testkit.models import ensure_tiny_model

        target = args.target or str(ensure_tiny_model())
        cfg = FitConfig(epochs=args.epochs, threads=args.threads)
        path = Path(default_fit(target, args.out, cfg, log=sys.stderr).out)
    print(json.dumps(json.loads((path / "fit.json").read_text())["evaluation"]))
    print(path)
    return 0

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
import json
import math
import sys
import time
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
    """Token ids of a one-turn chat prompt, as the servers build it from the chat template."""
    out = tokenizer.apply_chat_template(
        [{"role": "user", "content": text}],
        add_generation_prompt=True,
        enable_thinking=thinking,
        tokenize=True,
    )
    if isinstance(out, dict) or hasattr(out, "keys"):
        out = out["input_ids"]
    if out and isinstance(out[0], list):
        out = out[0]
    return [int(t) for t in out]


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
    pos = torch.arange(t)
    causal = pos[None, :] <= pos[:, None]  # (T, T) key j visible to query t
    k0 = v0 = None
    diag_k: list[torch.Tensor] = []
    diag_v: list[torch.Tensor] = []
    total = torch.zeros(())
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
                loss = F.cross_entropy(
                    logits[:, :n].reshape(-1, logits.shape[-1]).float(),
                    lab.reshape(-1),
                    ignore_index=-100,
                )
                total = total + (decay**s) * loss
                weight_sum += decay**s
        hidden = pre
    return total / max(weight_sum, 1e-9)


def _batches(
    examples: Sequence[Example], batch_size: int, gen: torch.Generator, to_draft: torch.Tensor
) -> list[tuple[torch.Tensor, ...]]:
    """Padded batches: ids, aux, draft-vocabulary label index (-100: none), valid."""
    order = torch.randperm(len(examples), generator=gen).tolist()
    out = []
    for i in range(0, len(order), batch_size):
        group = [examples[j] for j in order[i : i + batch_size]]
        t = max(len(e.ids) for e in group)
        b = len(group)
        ids = torch.zeros(b, t, dtype=torch.long)
        aux = torch.zeros(b, t, group[0].aux.shape[-1])
        targets = torch.full((b, t), -100, dtype=torch.long)
        valid = torch.zeros(b, t, dtype=torch.bool)
        for r, e in enumerate(group):
            n = len(e.ids)
            ids[r, :n], aux[r, :n], valid[r, :n] = e.ids, e.aux, True
            targets[r, :n] = to_draft[e.labels.clamp(min=0)]
            targets[r, :n][e.labels < 0] = -100
        out.append((ids, aux, targets, valid))
    return out


def train(head: Eagle3Head, examples: Sequence[Example], cfg: FitConfig) -> dict[str, Any]:
    """AdamW over the head (embeddings excluded) until ``epochs`` or ``time_budget_s``."""
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
    for _epoch in range(cfg.epochs):
        for ids, aux, targets, valid in _batches(examples, cfg.batch_size, gen, to_draft):
            loss = ttt_loss(head, ids, aux, targets, valid, cfg.ttt_steps, cfg.step_decay)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            sched.step()
            losses.append(float(loss.item()))
            steps += 1
            if time.monotonic() - started > cfg.time_budget_s:
                break
        else:
            continue
        break
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

    from specperf import testmodels

    target = Path(target or testmodels.ensure_tiny_model())
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
    args = ap.parse_args(argv)
    if args.out is None:
        path = ensure_fitted_head(args.target, log=sys.stderr)
    else:
        from specperf.testmodels import ensure_tiny_model

        target = args.target or str(ensure_tiny_model())
        cfg = FitConfig(epochs=args.epochs, threads=args.threads)
        path = Path(default_fit(target, args.out, cfg, log=sys.stderr).out)
    print(json.dumps(json.loads((path / "fit.json").read_text())["evaluation"]))
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

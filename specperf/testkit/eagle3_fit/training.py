"""Training the head: the unrolled training-time-test loss, its cross-entropy (deterministic on a
GPU), padded batches, the tiny fit's epochs (``train``), the engine-path fit's full-batch run
(``train_full_batch``) and the deterministic-algorithms context it trains under."""

from __future__ import annotations

import contextlib
import math
import time
import warnings
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from specperf.engines.transformers.eagle3.head import Eagle3Head
from specperf.testkit.eagle3_fit.config import EngineFitConfig, Example, FitConfig


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

"""The training data: the target's greedy continuations with the fused aux rows it computed
(through ``generate()`` for the tiny fit, through the engine's served path for the engine-path
fit), the draft vocabulary picked from their labels, and digests of what was collected."""

from __future__ import annotations

import collections
import json
from collections.abc import Sequence
from typing import Any

import torch

from specperf.engines.transformers.eagle3.sampling import Sampling, TokenSampler
from specperf.engines.transformers.eagle3.speculate import StepInfo
from specperf.testkit.eagle3_fit.config import Example


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

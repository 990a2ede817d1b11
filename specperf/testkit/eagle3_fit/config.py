"""The fits' knobs and records: the tiny CPU fit's ``FitConfig`` (and the default one the cache
key uses), a collected ``Example``, the ``FitReport`` saved as fit.json, the engine-path fit's
``EngineFitConfig`` and ``EnginePlan``, and the versions that enter each recipe digest."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

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


DEFAULT_CFG = FitConfig(threads=1)  # one thread: the same head from one build to the next

ENGINE_FIT_VERSION = 1


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


@dataclass
class EnginePlan:
    """What an engine-path fit takes from a suite: the served target and its server arguments,
    the measured prompts (chat messages) and the sampling they are sent with."""

    server_args: list[str]  # engine server argv less host/port/draft/threads
    target: str
    target_identity: str | None
    tokenizer: str
    prompts: list[list[dict[str, str]]]
    heldout: list[list[dict[str, str]]]
    chat_kwargs: dict[str, Any]
    max_tokens: int
    ignore_eos: bool
    k: int

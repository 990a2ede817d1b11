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

Modules: ``config`` (knobs, records, versions), ``prompts``, ``data`` (the training data),
``training`` (the loss and both training loops), ``evaluate`` (MAL with the fitted head), ``tiny``
(the CPU fit of the tiny target), ``engine_plan`` and ``engine_fit`` (the fit on a suite's
engine path), ``cache`` (built once, named by recipe digest), ``cli`` (``python -m
specperf.testkit.eagle3_fit``). Every public name is re-exported here.
"""

from __future__ import annotations

from specperf.testkit.eagle3_fit.cache import (
    ensure_engine_fitted_head,
    ensure_fitted_head,
    fitted_head_key,
)
from specperf.testkit.eagle3_fit.cli import main
from specperf.testkit.eagle3_fit.config import (
    DEFAULT_CFG,
    ENGINE_FIT_VERSION,
    FIT_VERSION,
    HELDOUT,
    EngineFitConfig,
    EnginePlan,
    Example,
    FitConfig,
    FitReport,
)
from specperf.testkit.eagle3_fit.data import (
    collect,
    collect_engine_path,
    data_digests,
    pick_draft_vocab,
)
from specperf.testkit.eagle3_fit.engine_fit import fit_engine_head
from specperf.testkit.eagle3_fit.engine_plan import engine_fit_digest, engine_fit_plan
from specperf.testkit.eagle3_fit.evaluate import evaluate_engine_path, evaluate_mal
from specperf.testkit.eagle3_fit.prompts import chat_ids, hash_rank, pool_prompts, suite_prompts
from specperf.testkit.eagle3_fit.tiny import default_fit, fit_head
from specperf.testkit.eagle3_fit.training import (
    cross_entropy,
    deterministic_training,
    train,
    train_full_batch,
    ttt_loss,
)

__all__ = [
    "DEFAULT_CFG",
    "ENGINE_FIT_VERSION",
    "FIT_VERSION",
    "HELDOUT",
    "EngineFitConfig",
    "EnginePlan",
    "Example",
    "FitConfig",
    "FitReport",
    "chat_ids",
    "collect",
    "collect_engine_path",
    "cross_entropy",
    "data_digests",
    "default_fit",
    "deterministic_training",
    "engine_fit_digest",
    "engine_fit_plan",
    "ensure_engine_fitted_head",
    "ensure_fitted_head",
    "evaluate_engine_path",
    "evaluate_mal",
    "fit_engine_head",
    "fit_head",
    "fitted_head_key",
    "hash_rank",
    "main",
    "pick_draft_vocab",
    "pool_prompts",
    "suite_prompts",
    "train",
    "train_full_batch",
    "ttt_loss",
]

"""The engine-path fit (a suite's target on its served path, e.g. on a GPU): collect there, train
deterministically, save in the served dtype with fit.json, evaluate MAL on the suite's prompts
and the held-out ones."""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from specperf.engines.transformers.eagle3.checkpoint import new_head, save_head
from specperf.engines.transformers.eagle3.head import Eagle3Head
from specperf.testkit.eagle3_fit.config import ENGINE_FIT_VERSION, EngineFitConfig, EnginePlan
from specperf.testkit.eagle3_fit.data import _safe_digests, collect_engine_path, pick_draft_vocab
from specperf.testkit.eagle3_fit.engine_plan import _prompt_ids
from specperf.testkit.eagle3_fit.evaluate import evaluate_engine_path
from specperf.testkit.eagle3_fit.training import deterministic_training, train_full_batch

# ---------------------------------------------------------------- the engine path (GPU)
#
# A random-weight target of a real shape (the h200-transformers suite: Qwen3-8B's shape, vocab
# 151936) has near-tied top logits, so another kernel schedule — batched eager ``generate()``
# instead of the served, compiled verify step — picks another greedy token within a few tokens
# (compiled and eager can differ at the first token). A head distilled on
# ``generate()``'s continuations would then be judged on continuations it never saw. So this fit
# takes its data from the ENGINE's own path: the server's start-up code
# (``startup.start_backend``) builds target and EAGLE3 backend with the suite's own server
# arguments (same random weights, same compiled-vs-eager decision), drafts come from a random
# head (they are rejected, so every verify step commits the target's own greedy token), and the
# fused aux states are the very rows the served verify step hands the head. Prompts are exactly
# the suite's measured first turns (its request plan), so the head is fitted TO the suite's
# prompts, as the tiny head is (docs/transformers.md); held-out prompts give its generalisation.


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

    from specperf.engines.transformers.eagle3.checkpoint import load_head
    from specperf.engines.transformers.eagle3.config import load_config
    from specperf.engines.transformers.server import parse_args
    from specperf.engines.transformers.startup import start_backend

    def say(msg: str) -> None:
        if log is not None:
            print(msg, file=log, flush=True)

    t0 = time.monotonic()
    argv = [*plan.server_args, "--port", "0", "--draft-model", str(head_shape)]
    args = parse_args([*argv, "--draft-random-weights"])
    if args.threads:
        torch.set_num_threads(args.threads)
    tokenizer, backend, loaded = start_backend(args)
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

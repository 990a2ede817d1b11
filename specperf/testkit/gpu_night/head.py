"""The GPU night's EAGLE3 head: fitted (or found cached) on the engine's own path for the suite's
random target, or swapped for a random head under the fitted head's identity."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from specperf.testkit.gpu_night.suite import SUITE, repo_env, run_logged, suite_settings

FIT_NAME = "qwen3-8b-eagle3-fit"
SHAPE_HEAD = "qwen3-8b-eagle3-shape"
RANDOM_HEAD = "qwen3-8b-eagle3-random"
RANDOM_HEAD_SEED = 20261201


def fit_command(args: argparse.Namespace, models_dir: Path, out: Path) -> list[str]:
    cmd = [
        sys.executable,
        "-m",
        "specperf.testkit.eagle3_fit.cli",
        "--suite",
        str(getattr(args, "suite", SUITE)),
    ]
    for k, v in suite_settings(args, models_dir).items():
        cmd += ["--setting", f"{k}={v}"]
    cmd += ["--head-shape", str(models_dir / SHAPE_HEAD), "--out-root", str(models_dir)]
    cmd += ["--name", FIT_NAME, "--json", str(out)]
    if args.fit_steps:
        cmd += ["--steps", str(args.fit_steps)]
    return cmd


def write_random_head(shape_dir: Path, like: Path, out: Path, seed: int) -> Path:
    """A random head with the fitted head's config (and its draft vocabulary), saved as the
    fitted one is: what "the head swapped for a random one" means."""
    import torch

    from specperf.engines.transformers.eagle3.checkpoint import new_head, read_state, save_head
    from specperf.engines.transformers.eagle3.config import load_config

    cfg = load_config(like)
    d2t = read_state(like)["d2t"].long()
    head = new_head(cfg, d2t + torch.arange(cfg.draft_vocab_size), seed=seed)
    save_head(head, out, dtype=torch.bfloat16)
    (out / "README.md").write_text(
        f"random EAGLE3 head (seed {seed}) with the config of {like.name}: a deliberate\n"
        "regression for specperf gpu-night --eagle3-head random\n"
    )
    return out


def prepare_eagle3_head(args: argparse.Namespace, models_dir: Path) -> dict[str, Any]:
    """Fit (or find cached) the EAGLE3 head for the suite's random target and set
    ``args.head_settings``; with ``--eagle3-head random`` swap a random head in under the fitted
    head's identity. Returns what happened (for gpu_run.json)."""
    out = args.out / "fit.json"
    env = {**repo_env(), "CUBLAS_WORKSPACE_CONFIG": ":4096:8", "PYTHONUNBUFFERED": "1"}
    t0 = time.monotonic()
    cmd = fit_command(args, models_dir, out)
    print(f"== eagle3 head fit: {' '.join(cmd)}", flush=True)
    code = run_logged(cmd, env, args.out / "fit.log", args.fit_timeout)
    seconds = round(time.monotonic() - t0, 1)
    tail = (args.out / "fit.log").read_text(errors="replace").splitlines()[-12:]
    print("\n".join(tail), flush=True)
    if code != 0 or not out.exists():
        print(f"EAGLE3 head fit FAILED (exit {code}); the eagle3 item will not start", flush=True)
        return {"exit_code": code, "seconds": seconds}
    info = json.loads(out.read_text())
    fitted = Path(info["path"])
    head_dir, identity = fitted, info["identity"]
    if args.eagle3_head == "random":
        head_dir = write_random_head(
            models_dir / SHAPE_HEAD, fitted, models_dir / RANDOM_HEAD, RANDOM_HEAD_SEED
        )
        print(
            f"EAGLE3 head SWAPPED: {head_dir} (random, seed {RANDOM_HEAD_SEED}) under the fitted "
            f"head's identity {identity} — a deliberate regression; the MAL gate must fail",
            flush=True,
        )
    args.head_settings = {
        "eagle3_head": str(head_dir.relative_to(models_dir)),
        "eagle3_head_revision": identity,
    }
    fit = info.get("fit") or {}
    print(
        f"EAGLE3 head {identity} ({'cached' if info.get('cached') else 'fitted'} in {seconds} s"
        f"; weights sha256 {fit.get('weights_sha256', '?')[:16]}; fit-time MAL "
        f"{fit_time_mal(fit)})",
        flush=True,
    )
    return {
        "exit_code": code,
        "seconds": seconds,
        "identity": identity,
        "path": str(head_dir),
        "fitted_path": str(fitted),
        "cached": info.get("cached"),
        "swapped_for_random": args.eagle3_head == "random",
        "weights_sha256": fit.get("weights_sha256"),
        "fit_time_mal": None if args.eagle3_head == "random" else fit_time_mal(fit),
    }


def fit_time_mal(fit: dict[str, Any]) -> float | None:
    """The MAL the fit measured on the suite's prompts through the served path (fit.json)."""
    return ((fit.get("evaluation") or {}).get("suite") or {}).get("mean_acceptance_length")

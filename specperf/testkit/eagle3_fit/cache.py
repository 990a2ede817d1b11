"""Fitted heads are built once and cached by their recipe digest: the tiny head beside the tiny
model (``<tiny model>-eagle3-fit-<key>``), an engine-path head as ``<out_root>/<name>-<digest>``;
both atomic, under a file lock."""

from __future__ import annotations

import functools
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from specperf.testkit.eagle3_fit.config import (
    DEFAULT_CFG,
    FIT_VERSION,
    EngineFitConfig,
    EnginePlan,
    FitConfig,
)
from specperf.testkit.eagle3_fit.engine_fit import fit_engine_head
from specperf.testkit.eagle3_fit.engine_plan import engine_fit_digest
from specperf.testkit.eagle3_fit.prompts import suite_prompts
from specperf.testkit.eagle3_fit.tiny import default_fit


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

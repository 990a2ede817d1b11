"""What every tiny-model builder shares: the layout's names (the manifest, written last, and the
EAGLE3 head's folder), seeded random tensors and the files' sha256s the manifest records."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"
EAGLE3_DIR = "eagle3"


def _random_tensors(
    shapes: dict[str, tuple[int, ...]], seed: int, std: float, special_std: dict[str, float]
) -> dict[str, Any]:
    """Seeded weights by sorted name (independent of module init order): norms 1, rest N(0,σ)."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    out: dict[str, Any] = {}
    for name in sorted(shapes):
        shape = shapes[name]
        if name.endswith("norm.weight") or len(shape) == 1:
            out[name] = torch.ones(shape, dtype=torch.float32)
        else:
            sigma = next((v for k, v in special_std.items() if k in name), std)
            out[name] = torch.randn(shape, generator=gen, dtype=torch.float32) * sigma
    return out


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _file_hashes(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): _sha256(p)
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != MANIFEST
    }


def build_once(
    out: Path, lock: Path, digest_key: str, digest: str, build: Callable[[Path], None]
) -> Path:
    """Build ``out`` unless its manifest already records ``digest`` under ``digest_key``: under
    ``lock``, ``build`` fills a temp folder beside ``out`` (writing the manifest last), which then
    replaces ``out`` — so a crash never leaves a half-built folder that looks complete."""
    from filelock import FileLock

    with FileLock(str(lock)):
        try:
            done = json.loads((out / MANIFEST).read_text()).get(digest_key)
        except (OSError, ValueError):
            done = None
        if done != digest:
            tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
            shutil.rmtree(tmp, ignore_errors=True)
            try:
                build(tmp)
                shutil.rmtree(out, ignore_errors=True)
                tmp.rename(out)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    return out

"""Where the tiny models live and how they are built once: the cache root
(``SPECPERF_MODELS_DIR`` or ``~/.cache/specperf/models``), ``<name>-<digest>`` per recipe, a
build that is atomic (temp dir + rename, under a file lock) and complete only once its manifest
names the recipe's digest."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from specperf.testkit.models.artifacts import EAGLE3_DIR, MANIFEST
from specperf.testkit.models.qwen3 import _build_into
from specperf.testkit.models.recipe import DEFAULT_RECIPE, TinyRecipe


def is_complete(path: Path, recipe: TinyRecipe = DEFAULT_RECIPE) -> bool:
    """True when ``path`` holds a finished build of ``recipe`` (manifest written last)."""
    try:
        manifest = json.loads((Path(path) / MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    return manifest.get("recipe_digest") == recipe.digest()


def build_tiny_model(out: Path, recipe: TinyRecipe = DEFAULT_RECIPE, force: bool = False) -> Path:
    """Build ``recipe`` at exactly ``out`` (atomic: temp dir + rename, under a file lock);
    a finished build of the same recipe is kept as it is unless ``force``."""
    from filelock import FileLock

    out = Path(out).expanduser().resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out.parent / f".{out.name}.lock")):
        if is_complete(out, recipe) and not force:
            return out
        tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            _build_into(recipe, tmp)
            if out.exists():
                shutil.rmtree(out)
            tmp.rename(out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def models_root() -> Path:
    return Path(
        os.environ.get("SPECPERF_MODELS_DIR") or Path.home() / ".cache" / "specperf" / "models"
    ).expanduser()


def tiny_model_path(recipe: TinyRecipe = DEFAULT_RECIPE, root: Path | None = None) -> Path:
    """Where ``ensure_tiny_model`` keeps ``recipe`` (may not exist yet)."""
    return Path(root or models_root()) / f"{recipe.name}-{recipe.digest()}"


def ensure_tiny_model(recipe: TinyRecipe = DEFAULT_RECIPE, root: Path | None = None) -> Path:
    """Path of the tiny target model, built on first use and cached by recipe hash.
    The EAGLE3 head is at ``<path>/eagle3`` (see ``tiny_eagle3_path``)."""
    path = tiny_model_path(recipe, root)
    if is_complete(path, recipe):
        return path
    return build_tiny_model(path, recipe)


def tiny_eagle3_path(model_path: Path) -> Path:
    return Path(model_path) / EAGLE3_DIR

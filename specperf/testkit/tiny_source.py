"""The ``tiny:`` model source (specperf.model_sources): ``tiny:<recipe>`` → that local test model,
``tiny:<recipe>-eagle3`` → its random-init EAGLE3 head, ``tiny:<recipe>-eagle3-fit`` → an EAGLE3
head distilled on it (specperf.testkit.eagle3_fit); all built once, cached by recipe digest.

pyproject.toml registers :data:`SOURCE` as the ``tiny`` entry point of the
``specperf.model_sources`` group. The head fit is imported when a fitted head is asked for: it
needs torch, which naming a test model does not.
"""

from __future__ import annotations

from pathlib import Path

from specperf.errors import ConfigError
from specperf.testkit import models
from specperf.testkit.models.recipe import TinyRecipe

PREFIX = "tiny:"
# the target, its random-init EAGLE3 head, its fitted EAGLE3 head
SUFFIXES = ("-eagle3-fit", "-eagle3", "")


def parse(ref: str) -> tuple[TinyRecipe, str]:
    """``tiny:qwen3-eagle3-fit`` → (the qwen3 recipe, "-eagle3-fit"); unknown → ConfigError."""
    name = ref.removeprefix(PREFIX)
    for suffix in SUFFIXES:
        recipe_name = name.removesuffix(suffix) if suffix else name
        if (not suffix or name.endswith(suffix)) and recipe_name in models.RECIPES:
            return models.RECIPES[recipe_name], suffix
    known = ", ".join(f"tiny:{n}{s}" for n in sorted(models.RECIPES) for s in reversed(SUFFIXES))
    raise ConfigError(f"{ref}: unknown tiny model (known: {known})")


class TinySource:
    """The test models and their EAGLE3 heads, as a ModelSource."""

    def resolve(self, ref: str) -> Path:
        recipe, suffix = parse(ref)
        path = models.ensure_tiny_model(recipe)
        if suffix == "-eagle3":
            return models.tiny_eagle3_path(path)
        if suffix == "-eagle3-fit":
            from specperf.testkit import eagle3_fit

            return eagle3_fit.ensure_fitted_head(path)
        return path

    def identity(self, ref: str) -> str:
        """``<ref>@<recipe digest>``. Never a hash of the weights: seeded init and fitting differ
        in low bits between instruction sets, while the recipe (and, for the fitted head, the
        fit's own recipe) decides everything else."""
        recipe, suffix = parse(ref)
        if suffix == "-eagle3-fit":
            from specperf.testkit import eagle3_fit

            digest = eagle3_fit.fitted_head_key(models.tiny_model_path(recipe).name)
        else:
            digest = recipe.digest()
        return f"{ref}@{digest}"


SOURCE = TinySource()

__all__ = ["PREFIX", "SOURCE", "SUFFIXES", "TinySource", "parse"]

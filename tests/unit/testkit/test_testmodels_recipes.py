"""Named tiny-model recipes: `tiny:<name>`, `tiny:<name>-eagle3` and `tiny:<name>-eagle3-fit`
resolve to the same cache, and are identified in fingerprints by their recipe digest."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from specperf.errors import ConfigError
from specperf.testkit import models as testmodels
from specperf.testkit.models import cli
from specperf.testkit.tiny_source import SOURCE

ROOT = Path(__file__).resolve().parents[2]


def test_recipes_have_distinct_cache_dirs():
    paths = {testmodels.tiny_model_path(r) for r in testmodels.RECIPES.values()}
    assert len(paths) == len(testmodels.RECIPES)


def test_compute_recipe_is_wider_than_the_default():
    d, c = testmodels.DEFAULT_RECIPE, testmodels.COMPUTE_RECIPE
    assert c.hidden_size * c.intermediate_size > 4 * d.hidden_size * d.intermediate_size
    assert c.hidden_size == c.num_attention_heads * c.head_dim


def test_unknown_tiny_model_names_the_known_ones():
    with pytest.raises(ConfigError, match=r"tiny:nope: unknown tiny model .*tiny:qwen3-compute"):
        SOURCE.resolve("tiny:nope")
    with pytest.raises(ConfigError, match="tiny model 'nope'"):
        testmodels.recipe_named("nope")


def test_eagle3_suffix_resolves_to_the_head_of_that_model(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECPERF_MODELS_DIR", str(tmp_path))
    built = []
    monkeypatch.setattr(
        testmodels, "ensure_tiny_model", lambda r: built.append(r) or tmp_path / r.name
    )
    assert SOURCE.resolve("tiny:qwen3-compute-eagle3") == tmp_path / "compute-qwen3" / "eagle3"
    assert SOURCE.resolve("tiny:qwen3") == tmp_path / "tiny-qwen3"
    assert built == [testmodels.COMPUTE_RECIPE, testmodels.DEFAULT_RECIPE]


def test_cpu_tiny_can_swap_in_the_compute_bound_model():
    from specperf.config import Filters, load_suite

    suite = load_suite("cpu-tiny", {"tiny_model": "tiny:qwen3-compute"})
    items = {i.key.method: i for i in suite.items(Filters(dataset=("mt-bench",), concurrency=(4,)))}
    assert items["self-draft"].spec.draft_model == "tiny:qwen3-compute"
    assert items["eagle3"].spec.draft_model == "tiny:qwen3-compute-eagle3-fit"
    # a different model is a different fingerprint: never judged against tiny:qwen3's baselines
    digest = testmodels.COMPUTE_RECIPE.digest()
    assert items["native"].fingerprint_base()["model"] == f"tiny:qwen3-compute@{digest}"


def test_eagle3_fit_suffix_resolves_to_the_fitted_head_of_that_model(tmp_path, monkeypatch):
    from specperf.testkit import eagle3_fit as fit

    monkeypatch.setattr(testmodels, "ensure_tiny_model", lambda r: tmp_path / r.name)
    monkeypatch.setattr(fit, "ensure_fitted_head", lambda target: target.parent / "fitted")
    assert SOURCE.resolve("tiny:qwen3-compute-eagle3-fit") == tmp_path / "fitted"
    with pytest.raises(ConfigError, match="tiny:qwen3-eagle3-fitx: unknown tiny model"):
        SOURCE.resolve("tiny:qwen3-eagle3-fitx")


def test_tiny_identity_is_the_recipe_digest_never_a_path(tmp_path, monkeypatch):
    """Two machines (other cache roots, other ISAs) name one tiny artefact alike; another recipe
    or another fit recipe is another identity."""
    from specperf.testkit import eagle3_fit as fit

    d = testmodels.DEFAULT_RECIPE.digest()
    assert SOURCE.identity("tiny:qwen3") == f"tiny:qwen3@{d}"
    assert SOURCE.identity("tiny:qwen3-eagle3") == f"tiny:qwen3-eagle3@{d}"
    fitted = SOURCE.identity("tiny:qwen3-eagle3-fit")
    monkeypatch.setenv("SPECPERF_MODELS_DIR", str(tmp_path))
    assert SOURCE.identity("tiny:qwen3-eagle3-fit") == fitted  # the root is not in it
    assert str(tmp_path) not in fitted and fitted.startswith("tiny:qwen3-eagle3-fit@")
    assert SOURCE.identity("tiny:qwen3-compute-eagle3-fit") != fitted.replace(
        "qwen3-", "qwen3-compute-", 1
    )
    other = fit.fitted_head_key(
        testmodels.tiny_model_path().name, fit.FitConfig(threads=1, epochs=7)
    )
    assert f"tiny:qwen3-eagle3-fit@{other}" != fitted
    bigger = testmodels.TinyRecipe(hidden_size=320)
    assert bigger.digest() != d


@pytest.mark.parametrize("flags, fitted", [([], True), (["--no-eagle3-fit"], False)])
def test_model_build_makes_the_fitted_head_unless_told_not_to(tmp_path, monkeypatch, flags, fitted):
    """cpu-tiny's eagle3 method needs tiny:qwen3-eagle3-fit: `specperf model build` (what CI runs
    before the tests) builds it, so the first perf item does not pay for the fit."""
    import argparse

    from specperf.testkit import eagle3_fit as fit

    calls = []
    monkeypatch.setattr(cli, "ensure_tiny_model", lambda r: tmp_path / r.name)
    monkeypatch.setattr(fit, "ensure_fitted_head", lambda target: calls.append(target) or target)
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    assert cli.run(parser.parse_args(["build", *flags])) == 0
    assert calls == ([tmp_path / "tiny-qwen3"] if fitted else [])


def _python_m(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_python_m_testkit_models_runs_without_the_cli() -> None:
    out = _python_m("specperf.testkit.models", "path")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(testmodels.tiny_model_path())


def test_python_m_testkit_eagle3_fit_runs() -> None:
    pytest.importorskip("torch")
    out = _python_m("specperf.testkit.eagle3_fit", "--help")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: python -m specperf.testkit.eagle3_fit")
    assert "--head-shape" in out.stdout

"""Named tiny-model recipes: `tiny:<name>` and `tiny:<name>-eagle3` resolve to the same cache."""

from __future__ import annotations

import pytest

from specperf import pool, testmodels
from specperf.errors import ConfigError


def test_recipes_have_distinct_cache_dirs():
    paths = {testmodels.tiny_model_path(r) for r in testmodels.RECIPES.values()}
    assert len(paths) == len(testmodels.RECIPES)


def test_compute_recipe_is_wider_than_the_default():
    d, c = testmodels.DEFAULT_RECIPE, testmodels.COMPUTE_RECIPE
    assert c.hidden_size * c.intermediate_size > 4 * d.hidden_size * d.intermediate_size
    assert c.hidden_size == c.num_attention_heads * c.head_dim


def test_unknown_tiny_model_names_the_known_ones():
    with pytest.raises(ConfigError, match=r"tiny:nope: unknown tiny model .*tiny:qwen3-compute"):
        pool.resolve_tiny("tiny:nope")
    with pytest.raises(ConfigError, match="tiny model 'nope'"):
        testmodels.recipe_named("nope")


def test_eagle3_suffix_resolves_to_the_head_of_that_model(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECPERF_MODELS_DIR", str(tmp_path))
    built = []
    monkeypatch.setattr(
        testmodels, "ensure_tiny_model", lambda r: built.append(r) or tmp_path / r.name
    )
    assert pool.resolve_tiny("tiny:qwen3-compute-eagle3") == tmp_path / "compute-qwen3" / "eagle3"
    assert pool.resolve_tiny("tiny:qwen3") == tmp_path / "tiny-qwen3"
    assert built == [testmodels.COMPUTE_RECIPE, testmodels.DEFAULT_RECIPE]


def test_cpu_tiny_can_swap_in_the_compute_bound_model():
    from specperf.config import Filters, load_suite

    suite = load_suite("cpu-tiny", {"tiny_model": "tiny:qwen3-compute"})
    items = {i.key.method: i for i in suite.items(Filters(dataset=("mt-bench",), concurrency=(4,)))}
    assert items["self-draft"].spec.draft_model == "tiny:qwen3-compute"
    assert items["eagle3"].spec.draft_model == "tiny:qwen3-compute-eagle3"
    # a different model is a different fingerprint: never judged against tiny:qwen3's baselines
    assert items["native"].fingerprint_base()["model"] == "tiny:qwen3-compute"

"""A fitted EAGLE3 head's MAL does not depend on how many requests an item sends.

The GPU suite's head is fitted to exactly the measured prompts of the suite's request count
(held-out prompts accept far less), so the suite pins that count (``[workload]
size_to_min_duration = false``): where the min-duration sizing would grow an item, the EAGLE3 item
still sends the fitted prompts, and its MAL on every engine start equals the fit-time MAL. A suite
that leaves its EAGLE3 items to the sizing cannot be fitted, and a baseline entry of another count
fixes nothing. Checked on CPU with the tiny shapes, on a copy of the GPU suite made small enough
for a unit test (4 requests x 24 tokens, float32) whose minimum duration no item can reach.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from specperf.testkit import eagle3_fit as fit

ROOT = Path(__file__).resolve().parents[3]
SUITE = ROOT / "specperf" / "suites" / "h200-transformers.toml"
PIN = "size_to_min_duration = false"
PROFILE = "cpu-fitted-sizing"

pytestmark = pytest.mark.usefixtures("one_thread")


def _small_suite(root: Path, pinned: bool = True) -> Path:
    """The GPU suite, small and on CPU; its 600 s minimum makes the sizing want to grow every
    item (a start of seconds is far below twice the minimum)."""
    text = SUITE.read_text()
    for old, new in (
        ("requests = [12]", "requests = [4]"),
        ("max_tokens = 128", "max_tokens = 24"),
        ('dtype = "bfloat16"', 'dtype = "float32"'),
        ("warmup_requests = 1\n", "warmup_requests = 1\nmin_duration_s = 600\n"),
        *([] if pinned else [(PIN, "size_to_min_duration = true")]),
    ):
        assert old in text, f"the GPU suite no longer holds {old!r}"
        text = text.replace(old, new)
    path = root / ("small.toml" if pinned else "small-sized.toml")
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def small(gpu_run: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("fitted-sizing")
    gpu_run.models.build_models(root / "models", "tiny")
    return _small_suite(root), root / "models"


def _session(suite: Any, root: Path, repeat: int = 1) -> Any:
    from specperf.suite_run import RunOptions, SuiteRun

    return SuiteRun(
        RunOptions(
            suite=suite,
            results_dir=root / "results",
            baselines_dir=root / "baselines",
            hardware_profile=PROFILE,
            repeat=repeat,
            restart_between_repeats=True,
        )
    )


def _eagle3(suite: Any) -> Any:
    (item,) = [it for it in suite.items() if it.key.method == "eagle3"]
    return item


def test_the_gpu_suite_pins_its_request_count() -> None:
    from specperf.config import load_suite

    suite = load_suite(str(SUITE))
    assert suite.items() and all(not it.workload.size_to_min_duration for it in suite.items())


def test_a_suite_whose_eagle3_items_may_be_sized_is_not_fitted(small: tuple[Path, Path]) -> None:
    from specperf.errors import ConfigError

    sized = _small_suite(small[0].parent, pinned=False)
    with pytest.raises(ConfigError, match="size_to_min_duration = false"):
        fit.engine_fit_plan(str(sized), {"models_dir": str(small[1]), "device": "cpu"})


@pytest.mark.parametrize("pinned", [True, False])
def test_an_entry_of_another_count_fixes_it_only_where_items_are_sized(
    small: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pinned: bool
) -> None:
    """An entry equal but for ``num_requests`` (8, twice the suite's 4) fixes the count of an
    item the sizing may grow; a pinned item sends the suite's count (the entry is stale)."""
    from specperf.config import load_suite
    from specperf.suite_run import runner as runner_mod

    path = small[0] if pinned else _small_suite(tmp_path, pinned=False)
    suite = load_suite(str(path), {"models_dir": str(small[1]), "device": "cpu"})
    item = _eagle3(suite)
    fingerprint = item.fingerprint_base()
    entry = SimpleNamespace(fingerprint={**fingerprint, "num_requests": 8})
    monkeypatch.setattr(runner_mod.bl, "load_baselines", lambda _path: {item.key: entry})
    sess = _session(suite, tmp_path)
    try:
        fixed, fp, size = sess._fixed_size(item, dict(fingerprint))
    finally:
        sess.close()
    want = (4, "suite") if pinned else (8, "baseline")
    assert (fixed.workload.num_requests, fp["num_requests"], size.source) == (*want[:1], *want)


def test_fitted_head_mal_is_the_fit_time_mal_where_the_sizing_would_grow_the_item(
    small: tuple[Path, Path],
) -> None:
    """Fit the head on the engine path (CPU), then measure the EAGLE3 item on two fresh engine
    starts under a minimum duration that the same suite, unpinned, grows items for: the item
    sends the suite's count and each start's MAL is the fit-time MAL. The held-out prompts (the
    ones a grown item would add) accept less: were the item grown, its MAL would move."""
    from specperf.config import load_suite
    from specperf.workload import sizing

    path, models = small
    settings = {"models_dir": str(models), "device": "cpu"}
    cfg = fit.EngineFitConfig()
    plan = fit.engine_fit_plan(str(path), settings, heldout=cfg.heldout)
    info = fit.ensure_engine_fitted_head(plan, models / "qwen3-8b-eagle3-shape", models, "h", cfg)
    evaluation = info["fit"]["evaluation"]
    fit_mal = evaluation["suite"]["mean_acceptance_length"]
    held_mal = evaluation["held-out"]["mean_acceptance_length"]
    assert fit_mal >= 2.0, f"the head did not learn its prompts: fit-time MAL {fit_mal}"
    assert held_mal < fit_mal - 0.5, f"held-out MAL {held_mal} vs fitted {fit_mal}"

    suite = load_suite(
        str(path),
        {
            **settings,
            "eagle3_head": Path(info["path"]).name,
            "eagle3_head_revision": info["identity"],
        },
    )
    root = path.parent / "measured"
    sess = _session(suite, root, repeat=2)
    try:
        run = sess.measure(_eagle3(suite))
    finally:
        sess.close()
    summary = run.result.summary
    assert summary["completed"] == 4 and not summary.get("failed")
    assert summary["num_requests"] == 4
    assert summary["sizing"] == {"configured_requests": 4, "requests": 4, "source": "suite"}
    assert not (run.dir / sizing.SIZING_DIR).exists()
    mals = [r["mean_acceptance_length"] for r in summary["repeats"]]
    print(f"fit-time MAL {fit_mal}, held-out {held_mal}, per start {mals}, {summary['sizing']}")
    assert len(mals) == 2
    assert mals == pytest.approx([fit_mal, fit_mal], abs=1e-9), (mals, fit_mal)

    # the same starts, unpinned, are grown: the sizing is on for this suite and these durations
    unpinned = load_suite(str(_small_suite(root, pinned=False)), settings)
    other = _session(unpinned, root / "unpinned")
    try:
        assert other._sizes_items()
    finally:
        other.close()
    durations = [r["duration_s"] for r in summary["repeats"]]
    wl = _eagle3(unpinned).workload
    assert wl.size_to_min_duration
    for d in durations:
        assert sizing.grown_count(4, d, wl.min_duration_s, wl.item_deadline_s) == 4 * 16

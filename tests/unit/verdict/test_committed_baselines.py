"""The committed cpu-tiny baseline files are in step with the cpu-tiny suite: every entry's
fingerprint equals what the suite's item would record today, so `pytest -m perf` on that profile
compares instead of reporting "stale" (an entry whose request count the run sized, a whole
multiple of the suite's, fixes that count for later runs: specperf.workload.sizing). A suite
change that alters a fingerprint (requests, tier, a draft model, a server flag) must come with
re-made baselines; a file nobody can re-make (no host of its profile) is deleted, so that profile
starts anew with "no baseline … adopt with --update-baselines" instead of failing on stale entries.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from specperf import baselines as bl
from specperf import datasets
from specperf.config import load_suite
from specperf.verdict.evidence import speed_baseline_short
from specperf.workload import sizing

ROOT = Path(__file__).resolve().parents[3]


def _cpu_files() -> list[Path]:
    return sorted((ROOT / "baselines").glob("cpu-*.json"))


def _current_fingerprints() -> dict[str, dict]:
    suite = load_suite("cpu-tiny")
    out = {}
    for item in suite.items():
        fp = item.fingerprint_base()
        fp["dataset_version"] = datasets.load_dataset(item.key.dataset, tier=item.tier).version
        out[item.key.as_str()] = fp
    return out


@pytest.mark.parametrize("path", _cpu_files(), ids=lambda p: p.name)
def test_cpu_tiny_baselines_match_the_suite(path: Path) -> None:
    bf = bl.load_baselines(path)
    assert bf.hardware_profile and path.stem == bf.hardware_profile
    current = _current_fingerprints()
    for k, fp in current.items():  # a sized entry fixes its count: what a run would record
        entry = bf.entries.get(k)
        fixed = sizing.count_from_entry(entry and entry.fingerprint, fp, fp["num_requests"])
        if fixed:
            fp["num_requests"] = fixed
    stale = {
        k: bl.fingerprint_diff(e.fingerprint, current[k])[:2]
        for k, e in bf.entries.items()
        if k in current and bl.fingerprint_diff(e.fingerprint, current[k])
    }
    assert not stale, stale
    assert set(current) <= set(bf.entries), sorted(set(current) - set(bf.entries))


def test_every_stored_metric_can_fail_or_says_why() -> None:
    """A gate that cannot fail (baseline 0 with direction higher, MAL 1.0) is stored report-only
    with its reason, never as a silent pass."""
    for path in sorted((ROOT / "baselines").glob("*.json")):
        for key, entry in bl.load_baselines(path).entries.items():
            for name, m in entry.metrics.items():
                why = bl.cannot_fail(name, m.value, m.direction, m.tolerance)
                if why and entry.provenance.get("source") == "measured":
                    assert m.report_only, (path.name, key, name, why)
                if name == "mean_acceptance_length" and not m.report_only:
                    # a live MAL gate must be able to see a drop of its tolerance above 1.0
                    low = m.value * (1 - m.tolerance)
                    assert low > 1.0, (path.name, key, m.value)


def _h200_suite_fingerprints(gpu_run: ModuleType, tmp_path: Path) -> tuple[dict[str, dict], dict]:
    """The h200-transformers suite's items as `specperf gpu-night` runs them on a GPU (random-weight
    configs it writes, the EAGLE3 head fitted by specperf.testkit.eagle3_fit, identity = its recipe
    digest), rebuilt here: key -> the fingerprint a run records today, and the items."""
    from specperf.testkit import eagle3_fit as fit

    suite_path = str(ROOT / "specperf" / "suites" / "h200-transformers.toml")
    gpu_run.models.build_models(tmp_path, "qwen3-8b")
    settings = {"models_dir": str(tmp_path), "device": "cuda"}
    plan = fit.engine_fit_plan(suite_path, settings)
    head = fit.ensure_engine_fitted_head(
        plan, tmp_path / gpu_run.head.SHAPE_HEAD, tmp_path, gpu_run.head.FIT_NAME, digest_only=True
    )
    suite = load_suite(suite_path, {**settings, "eagle3_head_revision": head["identity"]})
    fps, items = {}, {}
    for item in suite.items():
        fp = item.fingerprint_base()
        fp["dataset_version"] = datasets.load_dataset(item.key.dataset, tier=item.tier).version
        fps[item.key.as_str()] = fp
        items[item.key.as_str()] = item
    return fps, items


def test_h200_baseline_matches_the_suite(gpu_run: ModuleType, tmp_path: Path) -> None:
    """baselines/nvidia-h200x1.json was made on three H200s from configs that
    `specperf gpu-night` writes (random weights: the fingerprint holds the configs' content
    digest) and the EAGLE3 head fitted by specperf.testkit.eagle3_fit (identity = its recipe
    digest). Rebuilt here: the same fingerprints, so a suite, config-builder or fit-recipe change
    that would leave the file stale fails here (re-make it: docs/transformers.md, "The GPU
    suite")."""
    fps, items = _h200_suite_fingerprints(gpu_run, tmp_path)
    bf = bl.load_baselines(ROOT / "baselines" / "nvidia-h200x1.json")
    assert bf.hardware_profile == "nvidia-h200x1"
    for key, fp in fps.items():
        entry = bf.entries[key]
        assert not bl.fingerprint_diff(entry.fingerprint, fp), bl.fingerprint_diff(
            entry.fingerprint, fp
        )
        # >= 3 engine starts per metric (MIN_BASELINE_STARTS), from more than one GPU
        for name, m in entry.metrics.items():
            assert len(m.starts or []) >= 3, name
            assert len({s.get("gpu_uuid") for s in m.starts or []}) >= 2, name
        # its speed gate is armed (starts from the item's min_baseline_days and enough
        # passes), so a check run's tok/s is judged, never "not evaluated"
        days = items[key].workload.min_baseline_days
        assert speed_baseline_short({}, entry, "output_throughput_tok_s", days) is None, key
    assert set(fps) == set(bf.entries)
    mal = bf.entries["qwen3-8b-shape/transformers/eagle3/gsm8k/c1/greedy"].metrics[
        "mean_acceptance_length"
    ]
    assert mal.value > 1.5 and not mal.report_only  # a gate that can fail


def test_h100_baseline_matches_the_suite(gpu_run: ModuleType, tmp_path: Path) -> None:
    """baselines/nvidia-h100-80gb-hbm3x1.json: every item of the suite. The decode-loop item
    from update passes of five H100 hosts on two UTC days (docs/baselines.md); native and EAGLE3
    from one update pass on one H100 (3 engine starts each, one day). Its entries must match the
    suite as the H200 file's do. The product's rule is checked both ways: a speed gate is armed
    exactly when the starts span the item's days, so the decode loop's tok/s is judged on an
    H100 and native's and EAGLE3's are report-only until another day's starts are
    appended; EAGLE3's MAL (the fitted head) gates from the first pass."""
    fps, items = _h200_suite_fingerprints(gpu_run, tmp_path)
    bf = bl.load_baselines(ROOT / "baselines" / "nvidia-h100-80gb-hbm3x1.json")
    assert bf.hardware_profile == "nvidia-h100-80gb-hbm3x1"
    assert set(bf.entries) == set(fps)
    armed = set()
    for key, entry in bf.entries.items():
        assert not bl.fingerprint_diff(entry.fingerprint, fps[key]), key
        for name, m in entry.metrics.items():
            assert len(m.starts or []) >= 3, name
        days = items[key].workload.min_baseline_days
        dates = {s["date"][:10] for s in entry.metrics["output_throughput_tok_s"].starts or []}
        short = speed_baseline_short({}, entry, "output_throughput_tok_s", days)
        assert (short is None) == (len(dates) >= days), (key, short, dates)
        if short is None:
            armed.add(key)
    assert armed >= {"qwen3-8b-shape/transformers-loop/native/gsm8k/c1/greedy"}
    mal = bf.entries["qwen3-8b-shape/transformers/eagle3/gsm8k/c1/greedy"].metrics[
        "mean_acceptance_length"
    ]
    assert mal.value > 1.5 and not mal.report_only  # a gate that can fail

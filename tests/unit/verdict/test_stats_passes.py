"""The verdict's statistics, the pass above the start: a run's starts share its host and window,
so with enough baseline passes the verdict compares this run as ONE pass value with the spread of
the baseline's pass means (docs/verdict.md, "The decision"). Seeded simulations where the
pass-to-pass spread equals the start-to-start spread show why: counting a
3-start run as three independent values raises the false-alarm rate many times over its level."""

from __future__ import annotations

import math
import random

import pytest

from specperf.verdict import decision, engine_effect, logscale

# Two-level noise of the size a GPU profile's passes show, log scale: (start-to-start sd,
# pass-to-pass sd) per item.
NOISE = {"native": (0.038, 0.036), "eagle3": (0.069, 0.071)}
BASELINE_PASSES = (3, 3, 3, 3, 3, 3)  # six nightly updates of 3 starts each
TRIALS = 1500
LEVEL = 0.01


def _draw(rng: random.Random, item: str, sizes, tag: str, effect: float = 0.0):
    within, between = NOISE[item]
    values, labels = [], []
    for i, n in enumerate(sizes):
        shift = rng.gauss(0, between) + math.log1p(effect)
        values += [math.exp(shift + rng.gauss(0, within)) for _ in range(n)]
        labels += [(tag, i)] * n
    return values, labels


def _engine_red_rate(use_passes: bool, effect: float, k: int = 3, seed: int = 7) -> float:
    rng = random.Random(seed)
    red = 0
    for _ in range(TRIALS):
        groups = []
        for item in NOISE:
            base, labels = _draw(rng, item, BASELINE_PASSES, "base")
            cur, _ = _draw(rng, item, (k,), "run", effect)
            groups.append((cur, base, labels if use_passes else None))
        d = engine_effect.engine_wide(
            groups, "higher", alpha=LEVEL, min_effect=0.0, units=list(NOISE)
        )
        red += bool(d.regressed)
    return red / TRIALS


def test_pass_level_engine_wide_keeps_its_false_alarm_level_where_start_level_does_not():
    start_level = _engine_red_rate(use_passes=False, effect=0.0)
    pass_level = _engine_red_rate(use_passes=True, effect=0.0)
    assert pass_level <= 1.5 * LEVEL, pass_level
    assert start_level >= 3 * LEVEL, start_level  # the flaw this replaces, kept visible


def test_pass_level_engine_wide_still_sees_a_large_slowdown():
    assert _engine_red_rate(use_passes=True, effect=-0.25) >= 0.9


def test_pass_level_item_check_keeps_its_level():
    rng = random.Random(11)
    red = {True: 0, False: 0}
    for _ in range(TRIALS):
        base, labels = _draw(rng, "eagle3", BASELINE_PASSES, "base")
        cur, _ = _draw(rng, "eagle3", (3,), "run")
        for use in (True, False):
            d = decision.decide(
                cur,
                base,
                "higher",
                alpha=LEVEL,
                min_effect=0.0,
                baseline_passes=labels if use else None,
            )
            red[use] += bool(d.regressed)
    assert red[True] / TRIALS <= 1.5 * LEVEL, red
    assert red[False] / TRIALS >= 3 * LEVEL, red


def test_one_start_per_pass_and_one_start_now_is_the_start_level_test():
    base = [97.0, 99.0, 100.0, 101.0, 103.0]
    labels = [("host", f"2026-12-0{i}") for i in range(1, 6)]
    with_passes = decision.decide([93.0], base, "higher", alpha=0.01, baseline_passes=labels)
    without = decision.decide([93.0], base, "higher", alpha=0.01)
    assert with_passes.p_value == pytest.approx(without.p_value)
    assert with_passes.reason.startswith("unit: the pass")


def test_fewer_than_three_passes_falls_back_to_starts_and_says_so():
    base = [97.0, 99.0, 100.0, 101.0, 103.0, 98.0]
    labels = [("host", "day1")] * 3 + [("host", "day2")] * 3
    d = decision.decide([90.0, 91.0, 89.0], base, "higher", alpha=0.01, baseline_passes=labels)
    plain = decision.decide([90.0, 91.0, 89.0], base, "higher", alpha=0.01)
    assert d.p_value == pytest.approx(plain.p_value)
    assert "2 pass(es), fewer than 3: starts taken as independent" in d.reason


def test_a_run_shifted_within_the_pass_spread_is_not_a_regression():
    # passes differ by ~6 %, starts within a pass by ~0.5 %: a run 10 % low with tight starts
    # is what a slow host looks like, not a regression, at the pass level
    base, labels = [], []
    for i, level in enumerate((100.0, 108.0, 92.0, 104.0, 96.0)):
        base += [level * f for f in (0.995, 1.0, 1.005)]
        labels += [("vm", f"night-{i}")] * 3
    cur = [90.0, 90.3, 89.8]
    passes = decision.decide(cur, base, "higher", alpha=0.01, baseline_passes=labels)
    starts = decision.decide(cur, base, "higher", alpha=0.01)
    assert passes.regressed is False and starts.regressed is True


def test_a_run_with_fewer_starts_than_the_baseline_passes_pays_for_its_own_noise():
    base, labels = [], []
    for i, level in enumerate((100.0, 101.0, 99.0, 100.5, 99.5)):
        base += [level * f for f in (0.9, 1.0, 1.1)]
        labels += [("vm", f"night-{i}")] * 3
    one = decision.decide([85.0], base, "higher", alpha=0.01, baseline_passes=labels)
    three = decision.decide([85.0, 85.0, 85.0], base, "higher", alpha=0.01, baseline_passes=labels)
    assert one.p_value > three.p_value  # one start carries the full start-to-start noise


def test_pass_means_groups_by_label_in_order_and_checks_lengths():
    means = logscale.pass_means([1.0, math.e, math.e**2], ["a", "b", "b"])
    assert means == [(0.0, 1), (pytest.approx(1.5), 2)]
    with pytest.raises(ValueError, match="3 values but 2 pass labels"):
        logscale.pass_means([1.0, 2.0, 3.0], ["a", "b"])

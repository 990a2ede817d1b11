"""The verdict's statistics (specperf.verdict: decision, variance, logscale, levels,
engine_effect): the decision rule of noisy metrics (per-start values, log scale, one-sided t
test at a per-check alpha AND a minimum effect) and the engine-wide check."""

from __future__ import annotations

import math

import pytest

from specperf.verdict import decision, engine_effect, levels, logscale
from specperf.verdict.spread import start_spread

BASE = [97.0, 99.0, 100.0, 101.0, 103.0]  # CV ~2 %


def test_values_below_one_are_handled_on_the_log_scale():
    # acceptance rates are < 1: their logs are negative (a bug once took logs twice)
    v = 0.7042606516290727
    d = decision.decide([v * 0.95], [v] * 4, "higher", min_effect=0.02, alpha=1e-4)
    assert d.regressed is True and d.ratio == pytest.approx(0.95)


@pytest.mark.parametrize(
    ("current", "regressed"),
    [([100.0], False), ([96.0], False), ([80.0], True), ([70.0, 72.0], True)],
)
def test_noisy_metric_needs_significance_and_minimum_effect(current, regressed):
    d = decision.decide(current, BASE, "higher", min_effect=0.05, alpha=0.01)
    assert d.regressed is regressed, d


def test_small_but_significant_change_below_the_minimum_effect_passes():
    tight = [100.0, 100.1, 99.9, 100.0, 100.05]
    d = decision.decide([97.0], tight, "higher", min_effect=0.05, alpha=0.01)
    assert d.p_value is not None and d.p_value < 0.01 and d.regressed is False


def test_large_change_within_the_noise_passes():
    noisy = [60.0, 100.0, 140.0, 80.0, 120.0]
    d = decision.decide([75.0], noisy, "higher", min_effect=0.05, alpha=0.001)
    assert d.regressed is False and d.ratio < 0.95


def test_lower_is_better_and_equal_directions():
    assert decision.decide([120.0], BASE, "lower", min_effect=0.05, alpha=0.01).regressed
    assert not decision.decide([80.0], BASE, "lower", min_effect=0.05, alpha=0.01).regressed
    assert decision.decide([1100.0], [1000.0] * 4, "equal", min_effect=0.02, alpha=0.01).regressed
    assert decision.decide([900.0], [1000.0] * 4, "equal", min_effect=0.02, alpha=0.01).regressed


def test_too_few_baseline_starts_cannot_be_decided():
    d = decision.decide([50.0], [100.0, 101.0], "higher")
    assert d.regressed is None and "2 start(s)" in d.reason and d.ratio == pytest.approx(0.5, 0.01)


def test_describe_states_method_sizes_alpha_and_min_effect():
    d = decision.decide([80.0], BASE, "higher", min_effect=0.05, alpha=0.001)
    text = d.describe()
    for part in (
        "one-sided t test on log per-start values",
        "1 start(s) vs 5",
        "alpha 0.001",
        "min effect 5%",
    ):
        assert part in text, text
    lo, hi = d.interval
    assert lo < d.ratio < hi


def test_engine_wide_sees_a_uniform_slowdown_no_single_item_shows():
    rng_bases = [[100 * (1 + 0.04 * math.sin(i * 7 + j)) for j in range(6)] for i in range(12)]
    slow = [([b[0] * 0.92], b[1:]) for b in rng_bases]
    alpha = 0.01 / 62
    single = [decision.decide(c, b, "higher", min_effect=0.05, alpha=alpha) for c, b in slow]
    assert not any(d.regressed for d in single)
    wide = engine_effect.engine_wide(slow, "higher", min_effect=0.05, alpha=alpha)
    assert wide.regressed is True, wide
    same = [([b[0]], b[1:]) for b in rng_bases]
    assert (
        engine_effect.engine_wide(same, "higher", min_effect=0.05, alpha=alpha).regressed is False
    )


def test_engine_wide_judges_a_lone_item_as_that_item():
    """An engine config with one item (the H200 decode-loop engine) is judged too: the mean of
    one ratio is that ratio, at the engine-wide level; with no comparable item, nothing."""
    d = engine_effect.engine_wide([([90.0], BASE)], "higher", alpha=0.0025)
    item = decision.decide([90.0], BASE, "higher", alpha=0.0025)
    assert d.regressed is not None and "over 1 item on 1 engine start group" in d.reason
    assert d.ratio == pytest.approx(item.ratio)
    assert d.regressed == item.regressed
    assert engine_effect.engine_wide([([100.0], BASE)], "higher", alpha=0.0025).regressed is False
    none = engine_effect.engine_wide([([90.0], BASE[:2])], "higher")
    assert none.regressed is None and "no item whose baseline has >= 3 engine starts" in none.reason


def test_per_check_alpha_is_bonferroni():
    assert levels.per_check_alpha(0.01, 50) == pytest.approx(0.0002)
    assert levels.per_check_alpha(0.01, 0) == 0.01


def test_engine_wide_counts_items_of_one_engine_start_once():
    """Items measured on one engine start share its luck: twelve items on four starts are four
    independent looks, not twelve (pseudo-replication would make the check trigger-happy)."""
    bases = [[100 * (1 + 0.04 * math.sin(i * 7 + j)) for j in range(6)] for i in range(12)]
    slow = [([b[0] * 0.93], b[1:]) for b in bases]
    alpha = 0.01 / 62
    independent = engine_effect.engine_wide(slow, "higher", min_effect=0.05, alpha=alpha)
    shared = engine_effect.engine_wide(
        slow, "higher", min_effect=0.05, alpha=alpha, units=[str(i // 3) for i in range(12)]
    )
    assert independent.p_value < shared.p_value
    assert "12 items on 4 engine start group(s)" in shared.reason


def test_split_alpha_is_weighted_bonferroni():
    """Half the run's budget to the engine-wide checks, half to the items; the sum of all
    per-check levels never exceeds the run's budget."""
    a = levels.split_alpha(0.01, 60, 2)
    assert a.item == pytest.approx(0.005 / 60)
    assert a.engine_wide == pytest.approx(0.0025)
    assert 60 * a.item + 2 * a.engine_wide == pytest.approx(0.01)
    assert levels.split_alpha(0.01, 60, 0).item == pytest.approx(0.01 / 60)
    assert levels.split_alpha(0.01, 0, 4).engine_wide == pytest.approx(0.0025)


def test_engine_wide_level_sees_an_8_percent_slowdown_the_equal_share_level_misses():
    """Four engine configs (units) of three items, 8 baseline starts each with ~4 % spread,
    tonight every item 8 % slower: p ~ 0.0006 — red at the engine-wide level of the split
    (0.0025), not at the old equal share of 62 checks (0.00016). The reason for the split."""
    spread = [1 + 1.5 * (x - 1) for x in [1.0, 1.03, 0.97, 1.02, 0.98, 1.04, 0.96, 1.0]]
    groups, units = [], []
    for cfg in range(4):
        for item in range(3):
            base = [100.0 * (1 + 0.1 * item) * s for s in spread]
            cur = [100.0 * (1 + 0.1 * item) * 0.92 * (1.0 + 0.005 * (cfg - 1.5))]
            groups.append((cur, base))
            units.append(f"cfg{cfg}")
    a = levels.split_alpha(0.01, 60, 2)
    new = engine_effect.engine_wide(
        groups, "higher", min_effect=0.05, alpha=a.engine_wide, units=units
    )
    old = engine_effect.engine_wide(groups, "higher", min_effect=0.05, alpha=0.01 / 62, units=units)
    assert new.ratio == pytest.approx(0.92, rel=0.01)
    assert new.regressed and not old.regressed


def test_pooled_spread_counts_the_degrees_of_freedom_of_one_item():
    """The items of a config share their engine starts: the pooled spread uses every item's
    deviations, but its df are one item's (the largest group's n - 1), not their sum."""
    sd, df = start_spread([[100, 102, 98], [50, 51, 49, 50], [7.0]])
    assert df == 3
    assert 0.01 < sd < 0.03
    assert start_spread([[5.0]]) == (0.0, 0)


def test_one_pooled_spread_for_shared_items_independent_groups_and_a_prior():
    """``logscale.pooled_spread`` is the one pooling: shared groups keep one item's df,
    independent groups add theirs, and a spread pooled elsewhere (sd, df) counts as one group
    of that many df."""
    a, b = [0.0, 0.02, -0.02], [0.01, -0.01, 0.03, -0.03]
    ss = 0.02**2 * 2 + sum(x * x for x in b)
    assert logscale.pooled_spread([a, b]) == (pytest.approx(math.sqrt(ss / 5)), 3)
    assert logscale.pooled_spread([a, b], shared=False) == (pytest.approx(math.sqrt(ss / 5)), 5)
    sd, df = logscale.pooled_spread([a], shared=False, prior=(0.1, 6))
    assert df == 8 and sd == pytest.approx(math.sqrt((0.1**2 * 6 + 0.02**2 * 2) / 8))
    assert logscale.pooled_spread([[0.3]], prior=(0.0, 0)) == (0.0, 0)


def test_items_moving_with_their_start_add_no_evidence():
    """Six baseline starts with ~2.3 % spread, tonight 15 % slower, item level 0.005 / 60: two
    more items of the config that move exactly with the same starts are no new evidence, so
    the pooled check decides as the item alone does (5 df, p 0.0005: not flagged)."""
    base = [100.0, 103.0, 97.5, 101.0, 98.0, 102.5]
    alpha = 0.005 / 60
    own = decision.decide([85.0], base, "higher", min_effect=0.05, alpha=alpha)
    spread = start_spread([base, [x * 3 for x in base[::-1]], [x * 5 for x in base]])
    pooled = decision.decide([85.0], base, "higher", min_effect=0.05, alpha=alpha, spread=spread)
    assert not own.regressed and not pooled.regressed
    assert pooled.p_value == pytest.approx(own.p_value)
    assert "pooled over 5 df" in pooled.describe()


def test_correlated_items_keep_the_false_alarm_rate_near_nominal():
    """At level 0.01, six items of one config whose starts move them all alike (perfectly
    correlated; 4 baseline starts each, tonight one start): over 20 000 seeded draws the
    pooled item check raises a false alarm at most 2x the nominal rate. (The items pooled as
    independent, 18 df instead of 3, raise ~4 %.)"""
    import numpy as np

    rng = np.random.default_rng(46)
    alpha, draws, sd, n = 0.01, 20_000, 0.03, 4
    alarms = 0
    for _ in range(draws):
        start = rng.normal(0.0, sd, size=n + 1)  # the baseline's starts and tonight's
        items = [np.exp(start + math.log(100.0 * (j + 1))) for j in range(6)]
        spread = start_spread([list(x[:n]) for x in items])
        d = decision.decide(
            [float(items[0][n])], list(items[0][:n]), "higher", min_effect=0.0, alpha=alpha,
            spread=spread,
        )  # fmt: skip
        alarms += bool(d.regressed)
    assert alarms / draws <= 2 * alpha, alarms / draws


def test_zero_is_a_value_not_a_missing_one():
    """A start measured at 0 against a positive baseline is a regression outright (acceptance
    0 vs 0.59: the draft stopped being accepted); only an unmeasured value is not decided."""
    d = decision.decide([0.0, 0.3, 0.3], [0.3] * 6, "higher")
    assert d.regressed is True and d.ratio == 0.0 and "regression outright" in d.reason
    assert decision.decide([0.0], [0.5906] * 3, "higher").regressed is True
    assert decision.decide([0.0], [0.5906] * 3, "equal").regressed is True
    assert decision.decide([0.0], [30.0] * 3, "lower").regressed is False  # lower is better
    missing = decision.decide([None], [0.5906] * 3, "higher")  # type: ignore[list-item]
    assert missing.regressed is None and "not measured" in missing.reason
    # MAL 1.0 (nothing accepted) is an ordinary value: a drop from 2.5
    assert decision.decide([1.0], [2.5] * 3, "higher", min_effect=0.02).regressed is True
    assert logscale.geometric_mean([0.0, 0.3]) == 0.0
    wide = engine_effect.engine_wide([([0.0], [0.3] * 3), ([0.3], [0.3] * 3)], "higher")
    assert wide.regressed is True and "regression outright" in wide.reason


def test_identical_starts_gate_as_a_stated_spread():
    """Three identical starts (a deterministic metric) floor the spread at MIN_LOG_SD, a stated
    value: the test then reduces to "moved by at least the minimum effect" at any level."""
    d = decision.decide([2.5 * 0.97], [2.5] * 3, "higher", min_effect=0.02, alpha=1e-5)
    assert d.regressed is True
    assert decision.decide([2.5 * 0.99], [2.5] * 3, "higher", min_effect=0.02).regressed is False


def test_detectable_change_is_the_change_flagged_nine_times_in_ten():
    """What the "sees" column promises, checked by simulation: starts drawn with the test's own
    noise (sd 5 % on the log scale, 6 baseline and 3 current starts, start level), shifted by
    the detectable change, are called a regression ~90 % of the time; half that shift far less."""
    import random

    sigma, n_base, n_cur, alpha = 0.05, 6, 3, 0.001
    se = sigma * math.sqrt(1 / n_cur + 1 / n_base)
    sees = decision.detectable_change(se, n_base + n_cur - 2, alpha, 0.05, "higher")
    assert -0.30 < sees < -0.10  # far beyond the 5 % minimum effect: the t test decides
    assert decision.detectable_change(se, 7, alpha, 0.05, "lower") > 0

    def red_share(shift: float) -> float:
        rng = random.Random(11)
        red = 0
        for _ in range(2000):
            base = [100 * math.exp(rng.gauss(0, sigma)) for _ in range(n_base)]
            cur = [100 * (1 + shift) * math.exp(rng.gauss(0, sigma)) for _ in range(n_cur)]
            red += bool(
                decision.decide(cur, base, "higher", min_effect=0.05, alpha=alpha).regressed
            )
        return red / 2000

    assert red_share(sees) == pytest.approx(decision.DETECT_POWER, abs=0.03)
    assert red_share(sees / 2) < 0.35


def test_a_decision_says_what_it_could_see():
    d = decision.decide([99.0], BASE, "higher", min_effect=0.05, alpha=0.001)
    assert d.detectable is not None and d.detectable < -0.05
    assert f"sees {d.detectable:+.0%} 90% of the time" in d.describe()
    tight = [100.0, 100.1, 99.9, 100.0, 100.05]  # no noise: the minimum effect is the floor
    assert decision.decide([99.0], tight, "higher", min_effect=0.05).detectable == -0.05
    wide = engine_effect.engine_wide([([99.0], BASE), ([98.0], BASE)], "higher", alpha=0.001)
    assert wide.detectable is not None and wide.detectable < -0.05
    assert decision.decide([1.0], [1.0, 1.0], "higher").detectable is None  # not decided
    both = decision.decide([100.0], BASE, "equal", min_effect=0.05, alpha=0.001)
    assert both.two_sided and both.detectable > 0 and "sees ±" in both.describe()

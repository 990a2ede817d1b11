"""The levels of a run's checks: its false-alarm budget split over the gated checks by weighted
Bonferroni (half to the few engine-wide checks, half to the many per-item ones), so a whole
unchanged run stays red at most ``run_alpha`` of the time whatever the dependence between
checks."""

from __future__ import annotations

from dataclasses import dataclass


def per_check_alpha(run_alpha: float, gated_checks: int) -> float:
    """Bonferroni: the run-wide false-alarm budget shared by the run's gated checks."""
    return run_alpha / max(1, gated_checks)


# The engine-wide checks get this share of the run's false-alarm budget, the per-item checks the
# rest (weighted Bonferroni: the run-wide rate stays <= run_alpha whatever the weights). Why not
# equal shares: the few engine-wide checks are the ones built to see a small uniform slowdown
# (their noise is averaged over an engine's items), while one item of a noisy metric cannot see
# 10 % at any level; a level of 0.0025 instead of 0.00016 lowers the engine-wide check's t
# quantile from ~4.2 to ~3.1 (28 df) and costs each item check little (7.3 instead of 6.6, 7 df).
ENGINE_WIDE_SHARE = 0.5


@dataclass(frozen=True)
class AlphaSplit:
    """Per-check levels of one run: ``item`` for each gated per-item check, ``engine_wide``
    for each engine-wide check."""

    item: float
    engine_wide: float


def split_alpha(
    run_alpha: float,
    item_checks: int,
    engine_checks: int,
    engine_share: float = ENGINE_WIDE_SHARE,
) -> AlphaSplit:
    """Weighted Bonferroni over the run's gated checks: ``engine_share`` of ``run_alpha`` to the
    engine-wide checks, the rest to the per-item checks (all of it to one kind when the other
    has none)."""
    if engine_checks <= 0:
        return AlphaSplit(per_check_alpha(run_alpha, item_checks), run_alpha)
    if item_checks <= 0:
        return AlphaSplit(run_alpha, per_check_alpha(run_alpha, engine_checks))
    return AlphaSplit(
        per_check_alpha(run_alpha * (1 - engine_share), item_checks),
        per_check_alpha(run_alpha * engine_share, engine_checks),
    )

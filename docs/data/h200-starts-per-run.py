"""Judge the 2026-12-02 H200 starts (a sixth GPU, docs/data/h200-day2b/) against
baselines/nvidia-h200x1.json as runs of K starts: every K-subset of the observed starts, the same
start indices for both items, with the h200-transformers suite's levels. Subsets of one condition
share starts, so they are not independent runs (docs/baselines.md, "H200: starts per run").

    python docs/data/h200-starts-per-run.py      # from the repository root
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from specperf import stats  # noqa: E402
from specperf import verdict as vd  # noqa: E402
from specperf.baselines import load_baselines  # noqa: E402
from specperf.config import load_suite  # noqa: E402

METRIC = "output_throughput_tok_s"
ITEMS = ("native", "eagle3")
# tok/s per engine start, read from the runs' summary.json files (u1 + u3a; t10a + t10c)
OBSERVED = {
    "unchanged": {"native": [92.7, 97.7, 97.3, 103.9], "eagle3": [196.5, 231.2, 238.5, 237.6]},
    "throttle 10 %": {
        "native": [86.2, 90.1, 88.8, 86.5, 82.3],
        "eagle3": [169.3, 178.3, 205.8, 166.4, 175.2],
    },
}


def main() -> int:
    suite = load_suite("h200-transformers")
    alpha = vd.check_alpha(
        suite.metrics, [i.key for i in suite.items() if i.key.engine == "transformers"]
    )  # the two items it was written for; since session 16 native's acceptance checks are not
    # counted, so its levels are a little higher than the ones its recorded output used
    bf = load_baselines(ROOT / "baselines" / "nvidia-h200x1.json")
    base = {k.split("/")[2]: e.start_values(METRIC) for k, e in bf.entries.items()}
    print(f"alpha item {alpha.item:.2g}, engine-wide {alpha.engine_wide:.2g}")
    result = {}
    for cond, starts in OBSERVED.items():
        n = len(starts["native"])
        for k in range(1, n + 1):
            red = {"engine_wide": 0, "native": 0, "eagle3": 0}
            ratios = []
            subsets = list(itertools.combinations(range(n), k))
            for idx in subsets:
                cur = {m: [starts[m][i] for i in idx] for m in ITEMS}
                ew = stats.engine_wide(
                    [(cur[m], base[m]) for m in ITEMS],
                    "higher",
                    alpha=alpha.engine_wide,
                    units=list(ITEMS),
                )
                red["engine_wide"] += bool(ew.regressed)
                ratios.append(ew.ratio)
                for m in ITEMS:
                    d = stats.decide(cur[m], base[m], "higher", alpha=alpha.item)
                    red[m] += bool(d.regressed)
            print(
                f"{cond:14s} K={k}: subsets {len(subsets):2d}  engine-wide red "
                f"{red['engine_wide']}  native red {red['native']}  eagle3 red {red['eagle3']}  "
                f"ratio {min(ratios):.3f}-{max(ratios):.3f}"
            )
            result[f"{cond} K={k}"] = {"subsets": len(subsets), "red": red, "ratios": ratios}
    out = ROOT / "docs" / "data" / "h200-starts-per-run.json"
    doc = {"observed_starts": OBSERVED, "baseline_starts": base, "result": result}
    out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Judge the session-7 H200 starts against baselines/nvidia-h200x1.json as runs of k starts
(every k-subset of the observed starts, same indices for both items), with the suite's alphas."""
import itertools, json, sys
sys.path.insert(0, ".")
from specperf import stats
from specperf import verdict as vd
from specperf.config import load_suite
from specperf.baselines import load_baselines
suite = load_suite("h200-transformers"); items = suite.items()
alpha = vd.check_alpha(suite.metrics, len(items), 1)
bf = load_baselines("baselines/nvidia-h200x1.json")
base = {k.split("/")[2]: e.start_values("output_throughput_tok_s") for k, e in bf.entries.items()}
obs = {
 "unchanged": {"native": [92.7, 97.7, 97.3, 103.9], "eagle3": [196.5, 231.2, 238.5, 237.6]},
 "throttle 10 %": {"native": [86.2, 90.1, 88.8, 86.5, 82.3], "eagle3": [169.3, 178.3, 205.8, 166.4, 175.2]},
}
out = {}
print(f"alpha item {alpha.item:.2g}, engine-wide {alpha.engine_wide:.2g}; baseline starts", {m: len(v) for m, v in base.items()})
for cond, d in obs.items():
    n = len(d["native"])
    for k in range(1, n + 1):
        ew = it_n = it_e = 0; runs = 0; ratios = []
        for idx in itertools.combinations(range(n), k):
            runs += 1
            cur = {m: [d[m][i] for i in idx] for m in d}
            e = stats.engine_wide([(cur[m], base[m]) for m in ("native", "eagle3")], "higher", alpha=alpha.engine_wide, units=["native", "eagle3"])
            ew += bool(e.regressed); ratios.append(e.ratio)
            it_n += bool(stats.decide(cur["native"], base["native"], "higher", alpha=alpha.item).regressed)
            it_e += bool(stats.decide(cur["eagle3"], base["eagle3"], "higher", alpha=alpha.item).regressed)
        print(f"{cond:14s} k={k}: runs {runs:2d}  engine-wide red {ew}/{runs}  native item red {it_n}/{runs}  eagle3 item red {it_e}/{runs}  ratio {min(ratios):.3f}-{max(ratios):.3f}")
        out[f"{cond} k={k}"] = {"runs": runs, "engine_wide_red": ew, "native_red": it_n, "eagle3_red": it_e, "ratio_min": min(ratios), "ratio_max": max(ratios)}
json.dump({"observed_starts": obs, "baseline_starts": base, "alpha": [alpha.item, alpha.engine_wide], "result": out}, open("docs/data/h200-starts-per-run.json", "w"), indent=1)

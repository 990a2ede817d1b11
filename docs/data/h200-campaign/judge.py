"""Judge every H200 check pass of issue 13's campaign (runs.json) against
baselines/nvidia-h200x1.json twice: at the pass level (what specperf does now: this run's starts
are one pass, compared with the spread of the baseline's pass means) and at the start level
(before 2026-12-02: every start an independent value). Then split the unchanged starts' spread
into its pass-to-pass and start-to-start parts (one-way ANOVA on the log values, the baseline's
passes and the unchanged campaign runs together). Read by docs/baselines.md ("Above the start:
the pass").

    python docs/data/h200-campaign/judge.py      # from the repository root; writes judge.json
    git show df6a5c3:baselines/nvidia-h200x1.json > /tmp/h200-4passes.json
    python docs/data/h200-campaign/judge.py --baseline /tmp/h200-4passes.json \
        --out judge-4passes.json

Runs marked ``in_baseline`` (session 11's update passes) are judged like the others, but are
left out of the spread split when the baseline already holds their starts (no double counting).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics as st
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from specperf import stats  # noqa: E402
from specperf import verdict as vd  # noqa: E402
from specperf.baselines import load_baselines  # noqa: E402
from specperf.config import load_suite  # noqa: E402

HERE = Path(__file__).resolve().parent
METRIC = "output_throughput_tok_s"
ITEMS = ("native", "eagle3")


def _judge(run: dict, base: dict, alpha: vd.AlphaSplit, passes: bool) -> dict:
    cur = {m: run[f"{m}_tok_s"] for m in ITEMS}
    labels = {m: (base[m][1] if passes else None) for m in ITEMS}
    ew = stats.engine_wide(
        [(cur[m], base[m][0], labels[m]) for m in ITEMS],
        "higher",
        alpha=alpha.engine_wide,
        units=list(ITEMS),
    )
    out = {"engine_wide": {"ratio": ew.ratio, "p": ew.p_value, "red": bool(ew.regressed)}}
    for m in ITEMS:
        d = stats.decide(cur[m], base[m][0], "higher", alpha=alpha.item, baseline_passes=labels[m])
        out[m] = {"ratio": d.ratio, "p": d.p_value, "red": bool(d.regressed)}
    return out


def _in(value: float, held: set[float]) -> bool:
    """runs.json rounds to 0.01 tok/s; the baseline keeps full precision."""
    return any(abs(value - h) < 0.006 for h in held)


def _components(groups: list[list[float]]) -> dict:
    """One-way ANOVA on the log values of several passes: within and between sd (log)."""
    logs = [[math.log(v) for v in g] for g in groups]
    allv = [x for g in logs for x in g]
    n, k = len(allv), len(logs)
    ssw = sum((x - st.fmean(g)) ** 2 for g in logs for x in g)
    dfw = n - k
    msw = ssw / dfw
    grand = st.fmean(allv)
    msb = sum(len(g) * (st.fmean(g) - grand) ** 2 for g in logs) / (k - 1)
    n0 = (n - sum(len(g) ** 2 for g in logs) / n) / (k - 1)
    between = max(0.0, (msb - msw) / n0)
    return {"starts": n, "passes": k, "within_sd": math.sqrt(msw), "between_sd": math.sqrt(between)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", type=Path, default=ROOT / "baselines" / "nvidia-h200x1.json")
    ap.add_argument("--out", default="judge.json", help="file name beside this script")
    args = ap.parse_args()
    suite = load_suite("h200-transformers")
    alpha = vd.suite_levels(suite)
    bf = load_baselines(args.baseline)
    base = {
        k.split("/")[2]: (e.start_values(METRIC), e.start_passes(METRIC))
        for k, e in bf.entries.items()
    }
    runs = json.loads((HERE / "runs.json").read_text(encoding="utf-8"))["runs"]
    npass = {m: len(set(base[m][1])) for m in ITEMS}
    print(f"baseline {args.baseline.name}: passes {npass}")
    print(f"alpha item {alpha.item:.2g}, engine-wide {alpha.engine_wide:.2g}")
    head = f"{'run':8s} {'condition':26s} {'engine-wide':>11s}"
    print(f"{head}  pass-level p (red)  start-level p (red)  native item pass-level p (red)")
    result = {}
    for run in runs:
        p, s = _judge(run, base, alpha, True), _judge(run, base, alpha, False)
        ew_p, ew_s = p["engine_wide"], s["engine_wide"]
        nat = p["native"]
        print(
            f"{run['run']:8s} {run['condition']:26s} {ew_p['ratio']:11.3f}  "
            f"{ew_p['p']:.2g} ({'RED' if ew_p['red'] else 'green'})"
            f"{'':10s}{ew_s['p']:.2g} ({'RED' if ew_s['red'] else 'green'})"
            f"{'':10s}{nat['ratio']:.3f} {nat['p']:.2g} ({'RED' if nat['red'] else 'green'})"
        )
        result[run["run"]] = {"pass_level": p, "start_level": s}
    comps = {}
    for m in ITEMS:
        values, labels = base[m]
        groups: dict = {}
        for v, lab in zip(values, labels, strict=True):
            groups.setdefault(lab, []).append(v)
        held = set(values)
        passes = list(groups.values()) + [
            r[f"{m}_tok_s"]
            for r in runs
            if r["condition"] == "unchanged"
            and not (r.get("in_baseline") and all(_in(v, held) for v in r[f"{m}_tok_s"]))
        ]
        comps[m] = _components(passes)
        c = comps[m]
        print(
            f"{m}: {c['starts']} unchanged starts in {c['passes']} passes: start-to-start sd "
            f"{c['within_sd']:.1%}, pass-to-pass sd {c['between_sd']:.1%} (log)"
        )
    doc = {
        "alpha": {"item": alpha.item, "engine_wide": alpha.engine_wide},
        "runs": result,
        "components": comps,
    }
    doc["baseline"] = {"file": args.baseline.name, "passes": npass}
    (HERE / args.out).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

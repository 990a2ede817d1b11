"""Two speeds per engine start on the H200 (issue 13, session 11): what makes starts differ.

Reads the per-request chunk times of session 11's unchanged passes (s11/v*-results.tar.gz,
3 starts per item each; --runs: others, e.g. session 12's s12/w*) and splits every request's
median step time (native: one token; EAGLE3: one verify step) into a fast and a slow level with
a two-means split per method. Prints per start the share of requests at the slow level, the two
levels, and the start's tok/s, then how much of the start-to-start spread the slow share
explains (correlation; sd of log tok/s with and without it), and whether the level changes
inside a request (one quarter of it near each level) or between requests.

    python docs/data/h200-campaign/step_regimes.py     # writes step_regimes.json beside it
    python docs/data/h200-campaign/step_regimes.py --runs s12/w1,s12/w2,s12/w3 \
        --out step_regimes-s12.json                    # session 12's check passes (3 hosts)
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics as st
import tarfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
RUNS = "s11/v1,s11/v2,s11/v3"  # session/run, results in <session>/<run>-results.tar.gz
METHODS = ("native", "eagle3")


def _starts(run: str, method: str) -> list[list[dict]]:
    """Every start's requests (the item's first start, then repeat-2, repeat-3)."""
    with tarfile.open(HERE / f"{run}-results.tar.gz") as tar:
        names = sorted(
            n
            for n in tar.getnames()
            if f"transformers-{method}-gsm8k-c1/" in n and n.endswith("requests.jsonl")
        )
        names.sort(key=lambda n: (n.count("/"), n))  # the item's own file first
        out = []
        for n in names:
            f = tar.extractfile(n)
            assert f is not None
            out.append([json.loads(line) for line in f.read().decode().splitlines()])
        return out


def _quarter_medians(req: dict) -> list[float]:
    gaps = [1e3 * (b - a) for a, b in itertools.pairwise(req["chunk_times_s"])]
    q = len(gaps) // 4
    return [st.median(gaps[i * q : (i + 1) * q]) for i in range(4)]


def _two_means(xs: list[float]) -> float:
    """Threshold between two levels (1-D k-means, k = 2)."""
    lo, hi = min(xs), max(xs)
    for _ in range(50):
        cut = (lo + hi) / 2
        a, b = [x for x in xs if x <= cut], [x for x in xs if x > cut]
        if not a or not b:
            break
        lo, hi = st.fmean(a), st.fmean(b)
    return (lo + hi) / 2


def _corr(xs: list[float], ys: list[float]) -> float:
    mx, my = st.fmean(xs), st.fmean(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    return sxy / math.sqrt(sum((x - mx) ** 2 for x in xs) * sum((y - my) ** 2 for y in ys))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", default=RUNS, help="session/run,... (default: %(default)s)")
    ap.add_argument("--out", default="step_regimes.json", help="file name beside this script")
    args = ap.parse_args()
    doc: dict = {}
    for method in METHODS:
        starts = [
            (run.rsplit("/", 1)[-1], i, reqs)
            for run in args.runs.split(",")
            for i, reqs in enumerate(_starts(run, method))
        ]
        meds = {
            (run, i, k): st.median(_quarter_medians(r))
            for run, i, reqs in starts
            for k, r in enumerate(reqs)
        }
        cut = _two_means(list(meds.values()))
        lo = st.fmean([m for m in meds.values() if m <= cut])
        hi = st.fmean([m for m in meds.values() if m > cut])
        clear_fast, clear_slow = lo + (hi - lo) / 4, hi - (hi - lo) / 4
        rows, shares, logs = [], [], []
        inside = between = 0
        for run, i, reqs in starts:
            levels = [meds[(run, i, k)] > cut for k in range(len(reqs))]
            for r in reqs:  # a level change inside a request: a quarter clearly at each level
                qs = _quarter_medians(r)
                inside += min(qs) <= clear_fast and max(qs) >= clear_slow
            between += sum(a != b for a, b in itertools.pairwise(levels))
            fast = [meds[(run, i, k)] for k, slow in enumerate(levels) if not slow]
            slow = [meds[(run, i, k)] for k, s in enumerate(levels) if s]
            tok_s = sum(r["output_tokens"] for r in reqs) / sum(r["e2e_s"] for r in reqs)
            share = sum(levels) / len(levels)
            rows.append(
                {
                    "run": run,
                    "start": i + 1,
                    "slow_share": share,
                    "fast_ms": st.fmean(fast) if fast else None,
                    "slow_ms": st.fmean(slow) if slow else None,
                    "tok_s_e2e": tok_s,
                }
            )
            shares.append(share)
            logs.append(math.log(tok_s))
        # the spread left once the slow share is accounted for (residual of a straight line)
        r = _corr(shares, logs)
        sd = st.stdev(logs)
        resid = sd * math.sqrt(max(0.0, 1 - r * r) * (len(logs) - 1) / (len(logs) - 2))
        fast_all = [m for m in meds.values() if m <= cut]
        slow_all = [m for m in meds.values() if m > cut]
        doc[method] = {
            "cut_ms": cut,
            "fast_level_ms": st.fmean(fast_all),
            "slow_level_ms": st.fmean(slow_all),
            "requests_slow": f"{len(slow_all)} of {len(meds)}",
            "corr_slow_share_log_tok_s": r,
            "sd_log_tok_s": sd,
            "sd_log_tok_s_given_share": resid,
            "level_changes_between_requests": between,
            "requests_changing_level_inside": inside,
            "starts": rows,
            "request_medians_ms": sorted(round(m, 3) for m in meds.values()),  # one per request
        }
        print(
            f"{method}: levels {st.fmean(fast_all):.2f} / {st.fmean(slow_all):.2f} ms "
            f"(cut {cut:.2f}); {len(slow_all)} of {len(meds)} requests slow; {between} level "
            f"changes between requests, {inside} requests change level inside (a quarter of "
            f"the request within a quarter of the gap of each level)"
        )
        for row in rows:
            print(
                f"  {row['run']} start {row['start']}: slow share {row['slow_share']:.2f}, "
                f"{row['tok_s_e2e']:.1f} tok/s"
            )
        print(
            f"  corr(slow share, log tok/s) {r:.3f}; sd of log tok/s {sd:.1%}, "
            f"{resid:.1%} once the slow share is accounted for"
        )
    (HERE / args.out).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

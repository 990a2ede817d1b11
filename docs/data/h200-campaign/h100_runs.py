"""Collect the H100 campaign's loop-item runs (sessions 27 on) into h100_runs.json, the shape
judge_loop.py reads (loop_runs.json is the H200's): per run its condition, the throttle's share,
the GPU, the UTC time and output tok/s per engine start.

    python docs/data/h200-campaign/h100_runs.py s27 s28 s29 s30 ...   # from the repository root

Stored passes come from the committed baselines/nvidia-h100-80gb-hbm3x1.json (its starts grouped
by pass date), named after the update step whose tarball holds the same starts; check steps
(``uh*`` unchanged, ``lh*``/``lq*`` throttled, share from the step's ``.throttle.json``) from
the session folders' tarballs. Nothing here judges: judge_loop.py does."""

from __future__ import annotations

import json
import sys
import tarfile
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
FILE = ROOT / "baselines" / "nvidia-h100-80gb-hbm3x1.json"
METRIC = "output_throughput_tok_s"


def _step(tgz: Path) -> dict | None:
    """One step's tok/s per start, GPU, time and throttle share, read from its tarball."""
    name = tgz.name.removesuffix(".tar.gz")
    with tarfile.open(tgz) as tar:
        summaries = [m for m in tar.getmembers() if m.name.endswith("/summary.json")]
        if not summaries:
            return None
        summary = json.load(tar.extractfile(summaries[0]))
        throttle = next((m for m in tar.getmembers() if m.name == f"{name}.throttle.json"), None)
        share = json.load(tar.extractfile(throttle))["share"] if throttle else 0.0
    gpus = summary["environment"]["gpus"]
    return {
        "name": name,
        "pass": "results-update" in summaries[0].name,
        "share": share,
        "gpu_uuid": gpus[0]["uuid"],
        "utc": f"{datetime.fromtimestamp(summary['wall_clock']['started'], UTC):%Y-%m-%dT%H:%M}",
        "tok_s": [round(r[METRIC], 2) for r in summary["repeats"]],
    }


def main(sessions: list[str]) -> int:
    steps = []
    for session in sessions:
        for tgz in sorted((HERE / session).glob("*.tar.gz")):
            step = _step(tgz)
            if step:
                step["session"] = session
                steps.append(step)
    entry = next(iter(json.loads(FILE.read_text(encoding="utf-8"))["entries"].values()))
    by_date: dict[str, list[dict]] = {}
    for start in entry["metrics"][METRIC]["starts"]:
        by_date.setdefault(start["date"], []).append(start)
    runs = []
    for date, starts in by_date.items():
        values = [round(s["value"], 2) for s in starts]
        twin = next((s for s in steps if s["pass"] and s["tok_s"] == values), None)
        runs.append(
            {
                "run": f"{twin['name']}-{twin['session']}" if twin else f"pass-{date[:16]}",
                "condition": "pass",
                "share": 0.0,
                "gpu_uuid": starts[0]["gpu_uuid"],
                "utc": date[:16],
                "tok_s": values,
            }
        )
    stored = [r["tok_s"] for r in runs]
    for step in steps:
        if step["pass"]:
            if step["tok_s"] not in stored:  # e.g. an update pass not yet copied into baselines/
                print(f"{step['session']}/{step['name']}: update pass not in {FILE.name}, left out")
            continue
        runs.append(
            {
                "run": f"{step['name']}-{step['session']}",
                "condition": "throttle" if step["share"] else "check",
                "share": step["share"],
                "gpu_uuid": step["gpu_uuid"],
                "utc": step["utc"],
                "tok_s": step["tok_s"],
            }
        )
    runs.sort(key=lambda r: r["utc"])
    doc = {
        "note": (
            "transformers-loop item on H100 80GB HBM3 hosts, output tok/s per engine start; "
            "'pass' runs are the update passes stored in baselines/nvidia-h100-80gb-hbm3x1.json, "
            "'check' runs unchanged check passes (never stored), 'throttle' runs check passes "
            "under benchmarks/throttle_engine.py --share S --match=--decode-loop. Written by "
            f"h100_runs.py from {', '.join(sessions)}."
        ),
        "runs": runs,
    }
    (HERE / "h100_runs.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(f"{len(runs)} runs ({sum(r['condition'] == 'pass' for r in runs)} stored passes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:] or ["s27", "s28", "s29", "s30"]))

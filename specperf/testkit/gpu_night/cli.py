"""``specperf gpu-night``: its options and the steps in order (models, head fit, passes, report)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tarfile
import textwrap
import time
from pathlib import Path
from typing import Any

from specperf.cli import readable_metavars
from specperf.errors import ConfigError, SpecperfError
from specperf.testkit.commands import GPU_NIGHT
from specperf.testkit.gpu_night.figures import collect, markdown
from specperf.testkit.gpu_night.hardware import gpu_indices, hbm_bytes_per_s, host_identity
from specperf.testkit.gpu_night.head import prepare_eagle3_head
from specperf.testkit.gpu_night.models import build_models
from specperf.testkit.gpu_night.passes import annotate_starts, baseline_contents, run_pass
from specperf.testkit.gpu_night.suite import SUITE, default_root, suite_settings
from specperf.testkit.gpu_night.verdicts import fit_mal_lines

PASSES = ("fit", "update", "check")  # the steps --passes may name, in the order they run


def step(name: str, steps: dict[str, float], since: float) -> None:
    """Record and print a step's wall time (``STEP fit: 104.9 s``): each step of a GPU night
    must end inside one device call."""
    steps[name] = round(time.monotonic() - since, 1)
    print(f"STEP {name}: {steps[name]} s", flush=True)


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of ``specperf gpu-night`` (and of ``python -m specperf.testkit.gpu_night``)."""
    ap.add_argument("--out", type=Path, default=Path("gpu-run-out"), help="report folder")
    ap.add_argument(
        "--passes",
        default="update,check",
        metavar="STEP[,STEP]",
        help="comma list of fit|update|check, run in that order; the head is fitted before any "
        "pass that needs it (fit alone: only the fit)",
    )
    ap.add_argument(
        "--suite",
        type=Path,
        default=SUITE,
        help="suite file (default: the packaged h200-transformers; another must name the same "
        "models_dir, device and eagle3_head settings)",
    )
    ap.add_argument("--shapes", choices=("qwen3-8b", "tiny"), default="qwen3-8b")
    ap.add_argument("--device", default="cuda", help="cuda, or cpu for a dry run")
    ap.add_argument("--root", type=Path, default=None, help="the suite repository (tests/perf)")
    ap.add_argument("--models-dir", type=Path, default=None, help="where the configs are built")
    ap.add_argument(
        "--baselines-dir", type=Path, default=None, help="baseline files (default ROOT/baselines)"
    )
    ap.add_argument("--work", type=Path, default=None, metavar="DIR", help="results root")
    ap.add_argument(
        "--hbm-tb-s",
        type=float,
        default=None,
        help="GPU memory bandwidth for the roofline line (default: the GPU's datasheet figure, "
        "from HBM_BYTES_PER_S; none for a GPU not listed)",
    )
    ap.add_argument("--pass-timeout", type=float, default=3600.0, help="seconds per pass")
    ap.add_argument(
        "--eagle3-head",
        choices=("fitted", "random", "none"),
        default="fitted",
        help="fitted: fit (or reuse) the head for the random target; random: a random head under "
        "the fitted head's identity (a deliberate regression: the MAL gate must fail); none: no "
        "head, for passes without EAGLE3 (-- --engine transformers-loop, or --method native)",
    )
    ap.add_argument("--fit-timeout", type=float, default=900.0, help="seconds for the head fit")
    ap.add_argument(
        "--budget-s",
        type=float,
        default=None,
        metavar="SECONDS",
        help="seconds for the whole command (a device call's limit): the fit and every pass get "
        "at most what is left, less 20 s to write the report",
    )
    ap.add_argument("--fit-steps", type=int, default=None, help="training steps of the fit")
    ap.add_argument("--markdown", type=Path, default=None, help="print the tables of a run")
    ap.add_argument(
        "pytest_args", nargs="*", metavar="PYTEST_ARG", help="extra pytest arguments (after --)"
    )


def main(argv: list[str] | None = None) -> int:
    """``specperf gpu-night ARGV`` without the other subcommands' imports (``python -m
    specperf.testkit.gpu_night`` runs it on bare CUDA images): the same parser, help and error
    handling as the CLI's."""
    first, _, rest = GPU_NIGHT.description.partition("\n\n")
    ap = argparse.ArgumentParser(
        prog="specperf gpu-night",
        description=textwrap.fill(first, 88) + ("\n\n" + rest if rest else ""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(ap)
    readable_metavars(ap)
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return run(args)
    except SpecperfError as exc:
        print(f"specperf gpu-night: error: {exc}", file=sys.stderr)
        return 2


def run(args: argparse.Namespace) -> int:
    """Models, head fit, passes, report (``specperf gpu-night``); the exit code is the worst
    pass's, or 1 when a fit asked for by ``--passes fit`` failed."""
    if args.markdown:
        print(markdown(json.loads(args.markdown.read_text())))
        return 0
    names = [p for p in args.passes.split(",") if p]
    unknown = sorted(set(names) - set(PASSES))
    if unknown or not names:
        raise ConfigError(
            f"--passes {args.passes}: {','.join(unknown) or 'empty'}: not one of {'|'.join(PASSES)}"
        )
    pytest_passes = [n for n in PASSES if n in names and n != "fit"]
    args.root = args.root or default_root()
    args.baselines_dir = args.baselines_dir or args.root / "baselines"
    args.out.mkdir(parents=True, exist_ok=True)
    steps: dict[str, float] = {}
    models_dir = args.models_dir or Path.home() / ".cache/specperf/models" / f"shapes-{args.shapes}"
    work = args.work or Path("/tmp") / f"specperf-gpu-run-{os.getpid()}"
    started = time.strftime("%Y-%m-%dT%H:%M:%S")
    t0 = time.monotonic()
    host = host_identity()
    print(f"HOST {json.dumps(host)}", flush=True)
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    before = baseline_contents(args.baselines_dir)
    models = build_models(models_dir, args.shapes)
    print(f"models: {models} ({time.monotonic() - t0:.1f}s)", flush=True)
    step("models", steps, t0)
    if args.budget_s:
        args.fit_timeout = min(args.fit_timeout, args.budget_s - 60 - (time.monotonic() - t0))
    if args.eagle3_head == "none":
        head: dict[str, Any] = {"skipped": "--eagle3-head none"}
        print("EAGLE3 head: none (no fit); an eagle3 item in this pass cannot start", flush=True)
    else:
        t_fit = time.monotonic()
        head = prepare_eagle3_head(args, models_dir)
        step("fit", steps, t_fit)
    import torch
    import transformers

    device = {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "cuda": torch.version.cuda,
        "gpus": [torch.cuda.get_device_name(i) for i in gpu_indices()],
    }
    # the roofline's bandwidth: given, else the (first) GPU's datasheet figure, else none
    gpu_name = (device["gpus"] or [""])[0]
    hbm = args.hbm_tb_s * 1e12 if args.hbm_tb_s else hbm_bytes_per_s(gpu_name)
    if hbm is None and device["gpus"]:
        print(f"gpu_run: no memory bandwidth known for {gpu_name!r}: no roofline (--hbm-tb-s)")
    device["hbm_tb_s"] = hbm / 1e12 if hbm else None
    passes = []
    for name in pytest_passes:
        if args.budget_s:
            args.pass_timeout = min(args.pass_timeout, args.budget_s - 20 - (time.monotonic() - t0))
        res = work / f"results-{name}"
        t_pass = time.monotonic()
        passes.append(run_pass(name, args, models_dir, res, args.out / f"pytest-{name}.log"))
        step(f"pass {name}", steps, t_pass)
    report = {
        "started": started,
        "host": host,
        "device": device,
        "models": models,
        "eagle3_head": head,
        "settings": suite_settings(args, models_dir),
        "suite": str(args.suite),
        "passes": collect(passes, hbm),
        "seconds": round(time.monotonic() - t0, 1),
        "steps": steps,
    }
    (args.out / "gpu_run.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    for f in sorted(args.baselines_dir.glob("*.json")):  # the baseline file(s) this run wrote
        if before.get(f.name) != f.read_bytes():
            report.setdefault("starts_annotated", {})[f.name] = annotate_starts(f, since, host)
            shutil.copy(f, args.out / f"baseline-{f.name}")
    (args.out / "gpu_run.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    with tarfile.open(args.out / "results.tar.gz", "w:gz") as tar:
        for p in passes:
            tar.add(p["results_dir"], arcname=Path(p["results_dir"]).name)
    print(markdown(report), flush=True)
    print(f"HOST {host['hostname']} boot {host.get('boot_id')} gpus {host.get('gpus')}")
    step("total", steps, t0)
    print("STEPS " + ", ".join(f"{k} {v:.1f} s" for k, v in steps.items()), flush=True)
    fit_mal = head.get("fit_time_mal")
    for name, p in report["passes"].items():  # last, so they end the output the call returns
        for line in fit_mal_lines(name, p["items"], fit_mal):
            print(line, flush=True)
        for v in p.get("verdicts", []):
            print(v, flush=True)
    fit_failed = "fit" in names and head.get("exit_code") not in (0, None)
    return max([p["exit_code"] for p in passes] + [1 if fit_failed else 0])

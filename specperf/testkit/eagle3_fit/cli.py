"""``python -m specperf.testkit.eagle3_fit``: fit the tiny head on CPU (cached, or into
``--out``), or a suite's head on its engine path (``--suite``); prints the evaluation and the
head's path."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from specperf.testkit.eagle3_fit.cache import ensure_engine_fitted_head, ensure_fitted_head
from specperf.testkit.eagle3_fit.config import EngineFitConfig, FitConfig
from specperf.testkit.eagle3_fit.engine_plan import engine_fit_plan
from specperf.testkit.eagle3_fit.tiny import default_fit


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m specperf.testkit.eagle3_fit",
        description="Fit an EAGLE3 head to the tiny target by self-distillation on CPU "
        "(prints the evaluation JSON, then the head's path).",
    )
    ap.add_argument("--target", default=None, help="target model dir (default: the tiny model)")
    ap.add_argument(
        "--out", type=Path, default=None, help="head directory (default: the shared cache)"
    )
    ap.add_argument("--epochs", type=int, default=FitConfig.epochs)
    ap.add_argument("--threads", type=int, default=1)
    eng = ap.add_argument_group(
        "engine path (a suite's EAGLE3 item on the transformers engine, e.g. on a GPU)"
    )
    eng.add_argument("--suite", default=None, help="fit on this suite's engine path")
    eng.add_argument("--setting", action="append", default=[], help="KEY=VALUE (repeatable)")
    eng.add_argument("--method", default="eagle3", help="the suite's EAGLE3 method name")
    eng.add_argument("--head-shape", type=Path, help="directory whose config.json is the head's")
    eng.add_argument("--out-root", type=Path, help="cache folder (<name>-<digest> inside)")
    eng.add_argument("--name", default="eagle3-fit")
    eng.add_argument("--steps", type=int, default=EngineFitConfig.steps)
    eng.add_argument("--lr", type=float, default=EngineFitConfig.lr)
    eng.add_argument("--json", type=Path, default=None, help="write the result here too")
    eng.add_argument("--digest-only", action="store_true", help="print the recipe digest only")
    args = ap.parse_args(argv)
    if args.suite:
        import os

        settings = dict(kv.split("=", 1) for kv in args.setting)
        ecfg = EngineFitConfig(steps=args.steps, lr=args.lr)
        if not args.head_shape or not args.out_root:
            ap.error("--suite needs --head-shape and --out-root")
        plan = engine_fit_plan(args.suite, settings, args.method, ecfg.heldout)
        if not args.digest_only:
            # before CUDA starts: cuBLAS reads it once (the suite gives the engine the same)
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        info = ensure_engine_fitted_head(
            plan, args.head_shape, args.out_root, args.name, ecfg, sys.stderr, args.digest_only
        )
        text = json.dumps(info, indent=2, default=str)
        if args.json:
            args.json.write_text(text + "\n")
        print(text)
        return 0
    if args.out is None:
        path = ensure_fitted_head(args.target, log=sys.stderr)
    else:
        from specperf.testkit.models import ensure_tiny_model

        target = args.target or str(ensure_tiny_model())
        cfg = FitConfig(epochs=args.epochs, threads=args.threads)
        path = Path(default_fit(target, args.out, cfg, log=sys.stderr).out)
    print(json.dumps(json.loads((path / "fit.json").read_text())["evaluation"]))
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

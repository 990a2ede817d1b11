"""``specperf model build|path`` (and ``python -m specperf.testkit.models``): build the tiny test
models, or print where they are cached."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from specperf.testkit.models.artifacts import EAGLE3_DIR
from specperf.testkit.models.cache import build_tiny_model, ensure_tiny_model, tiny_model_path
from specperf.testkit.models.dflash import build_tiny_dflash
from specperf.testkit.models.mtp import ensure_tiny_mtp_model
from specperf.testkit.models.recipe import RECIPES, recipe_named


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="model_command", required=True)
    build = sub.add_parser("build", help="build the tiny Qwen3 + EAGLE3 test models (seconds)")
    build.add_argument(
        "--out",
        type=Path,
        default=None,
        help="build at exactly this directory (default: the cache, "
        "$SPECPERF_MODELS_DIR or ~/.cache/specperf/models/<name>-<hash>)",
    )
    build.add_argument("--force", action="store_true", help="rebuild even if already built")
    build.add_argument(
        "--recipe",
        default="qwen3",
        metavar="NAME",
        help=f"which tiny model (default qwen3; known: {', '.join(sorted(RECIPES))})",
    )
    build.add_argument(
        "--dflash", action="store_true", help="also build the tiny DFlash draft (<path>/dflash)"
    )
    build.add_argument(
        "--mtp", action="store_true", help="also build the tiny Qwen3-Next target with MTP"
    )
    build.add_argument(
        "--no-eagle3-fit",
        dest="eagle3_fit",
        action="store_false",
        help="skip the fitted EAGLE3 head (tiny:<name>-eagle3-fit, which cpu-tiny's eagle3 "
        "method uses; a deterministic fit of about a minute, cached by its recipe digest)",
    )
    path = sub.add_parser("path", help="print where the tiny model is cached (builds nothing)")
    path.add_argument("--recipe", default="qwen3", metavar="NAME", help="which tiny model")


def run(args: argparse.Namespace) -> int:
    recipe = recipe_named(args.recipe)
    if args.model_command == "path":
        print(tiny_model_path(recipe))
        return 0
    started = time.monotonic()
    if args.out is not None:
        path = build_tiny_model(args.out, recipe, force=args.force)
    elif args.force:
        path = build_tiny_model(tiny_model_path(recipe), recipe, force=True)
    else:
        path = ensure_tiny_model(recipe)
    if args.dflash:
        build_tiny_dflash(path, recipe)
    if args.mtp:
        print(f"tiny MTP target: {ensure_tiny_mtp_model()}")
    if getattr(args, "eagle3_fit", False):
        from specperf.testkit.eagle3_fit import ensure_fitted_head

        t0 = time.monotonic()
        head = ensure_fitted_head(path)
        took = time.monotonic() - t0
        print(f"fitted EAGLE3 head (tiny:{args.recipe}-eagle3-fit) in {took:.1f}s: {head}")
    print(
        f"tiny model ready in {time.monotonic() - started:.1f}s; EAGLE3 head: {path / EAGLE3_DIR}"
    )
    print(path)
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m specperf.testkit.models build` works without the full CLI."""
    parser = argparse.ArgumentParser(prog="python -m specperf.testkit.models")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())

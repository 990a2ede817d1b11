"""Building an engine env: ``create`` resolves the recipe from the release's own metadata,
probes that the pinned torch build can be had, checks the disk, builds the venv under the env's
lock, verifies it by importing and writes the marker last; a finished env whose recipe is
unchanged is reused without the network (``_ready``).

A release that cannot be installed fails with one line naming it and the cause (pip's output
classified by ``specperf.engine_envs.pipfail``; the install log kept beside the env root);
nothing half-made is left: the directory is removed on failure.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from collections import deque
from dataclasses import asdict
from pathlib import Path
from typing import Any

from specperf.engine_envs import release as release_mod
from specperf.engine_envs.paths import (
    INSTALL_LOG,
    MARKER,
    check_disk,
    dir_size,
    env_lock,
    env_python,
    env_root,
    read_marker,
    write_marker,
)
from specperf.engine_envs.pipfail import EnvInstallError, classify
from specperf.engine_envs.recipe import (
    TORCH_BUILDS,
    EnvRecipe,
    env_name,
    needs_release,
    normalize,
    recipe_for,
)
from specperf.engine_envs.release import Release
from specperf.errors import ConfigError, SpecperfError

_PROGRESS_PREFIXES = ("Collecting", "Installing collected", "Successfully", "ERROR", "Found")


def _say(msg: str) -> None:
    print(f"[specperf env] {msg}", file=sys.stderr, flush=True)


def _base_python(recipe: EnvRecipe | None = None) -> str:
    return (
        (recipe.python if recipe else None)
        or getattr(sys, "_base_executable", None)
        or sys.executable
    )


def _run_logged(
    cmd: list[str], log_path: Path, what: str, timeout_s: float, requirement: str = ""
) -> None:
    """Run ``cmd``, append its output to the log, show progress lines; on failure raise one
    line: the release, the cause read from the output (pip steps), the log path."""
    tail: deque[str] = deque(maxlen=400)
    started = time.monotonic()
    rc: int | None = None
    with open(log_path, "a") as log:
        log.write(f"\n$ {' '.join(cmd)}\n")
        log.flush()
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env=release_mod.pip_env(),
        )  # fmt: skip
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                log.write(line)
                if "is ignored: it is neither" not in line:
                    tail.append(line)
                if line.startswith(_PROGRESS_PREFIXES):
                    _say(f"{what}: {line.strip()[:160]}")
                if time.monotonic() - started > timeout_s:
                    proc.kill()
                    rc = 124
                    break
            if rc is None:
                rc = proc.wait()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        log.write(f"(exit {rc})\n")
    if rc == 0:
        return
    output = "".join(tail)
    who = requirement or what
    if rc == 124:
        raise EnvInstallError(who, f"{what} still running after {timeout_s:.0f}s", log_path)
    if "pip" in cmd:
        cause = classify(output, rc, requirement, platform_python(), "")
        raise EnvInstallError(who, f"{what}: {cause}", log_path)
    last = next((ln.strip() for ln in reversed(tail) if ln.strip()), "no output")
    raise EnvInstallError(who, f"{what} failed (exit {rc}): {last[:200]}", log_path)


def platform_python() -> str:
    return platform.python_version()


def _capture(python: Path, code: str) -> str:
    out = subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, timeout=300, check=True
    )
    return out.stdout


def _ready(
    env_dir: Path, requirement: str, torch_build: str | None, log_path: Path | None = None
) -> bool:
    """Whether the finished env in ``env_dir`` is what ``create`` would build now. The recipe is
    derived again from the release metadata stored in the marker (no network); a marker made
    before markers stored it is checked once against freshly fetched metadata and completed."""
    marker = read_marker(env_dir)
    if marker is None:
        return False
    if marker.get("requirement") and normalize(str(marker["requirement"])) != requirement:
        return False
    had = marker.get("torch_build_requested") or "pinned"
    if torch_build not in (None, "fallback") and torch_build != had:
        return False
    build = had if torch_build in (None, "fallback") else torch_build
    release = None
    if needs_release(requirement):
        if isinstance(marker.get("release"), dict):
            release = Release.from_json(marker["release"])
        else:  # an env made before markers stored the release: fetch once, then store it
            try:
                release = release_mod.fetch(requirement, _base_python(), log_path)
            except SpecperfError as exc:
                _say(f"{env_dir.name}: cannot read the release's metadata ({exc}); "
                     "using the env as it is")  # fmt: skip
                return True
    try:
        recipe = recipe_for(requirement, release, build)
    except SpecperfError:
        return False
    if recipe.digest() != marker.get("recipe_digest"):
        return False
    # what the marker derives from the recipe (torch pin and build, notes) follows the recipe code
    fields = _release_fields(recipe, release, marker.get("versions") or {})
    if release is None:
        fields = {k: v for k, v in fields.items() if k not in ("release", "yanked")}
    if any(marker.get(k) != v for k, v in fields.items()):
        marker.update(fields)
        marker["torch_build_requested"] = build
        marker.setdefault("size_bytes", dir_size(env_dir))
        write_marker(env_dir, marker)
    return True


def _release_fields(
    recipe: EnvRecipe, release: Release | None, versions: dict[str, Any]
) -> dict[str, Any]:
    installed = versions.get("torch")
    return {
        "release": release.to_json() if release else None,
        "yanked": release.yanked if release else None,
        "torch_pin": recipe.torch_pin,
        "torch_build": torch_build_of(recipe, installed),
        "notes": list(recipe.notes),
    }


def torch_build_of(recipe: EnvRecipe, installed: str | None) -> str | None:
    """What torch the env really has, against the release's pin: "pinned" (the very build the
    release pins), "generic" (the same version, another build), "other", or None (no pin)."""
    pin = recipe.torch_pin
    if not pin or not installed:
        return recipe.torch_build if pin else None
    if installed == pin:
        return "pinned"
    if installed.split("+")[0] == pin.split("+")[0]:
        return "generic"
    return "other"


def _resolve(
    requirement: str, torch_build: str, log_path: Path
) -> tuple[EnvRecipe, Release | None]:
    """The recipe, from the release's own metadata; then the probes (the pinned torch build can
    be had here). Nothing is built or removed yet."""
    release = None
    if needs_release(requirement):
        _say(f"{requirement}: reading the release's metadata (pip --dry-run --report)")
        release = release_mod.fetch(requirement, _base_python(), log_path)
        if release.yanked is not None:
            _say(f"{requirement}: WARNING: yanked upstream: {release.yanked or 'no reason given'}")
    recipe = recipe_for(
        requirement, release, "pinned" if torch_build == "fallback" else torch_build
    )
    for req in recipe.probe:
        ok, text = release_mod.available(req, _base_python(recipe), log_path)
        if ok:
            continue
        if recipe.torch_pin and req == f"torch=={recipe.torch_pin}" and torch_build == "fallback":
            _say(f"{requirement}: its pinned torch=={recipe.torch_pin} cannot be had here; "
                 "--torch-build fallback takes the generic build of that version")  # fmt: skip
            return _resolve(requirement, "generic", log_path)
        if recipe.torch_pin and req == f"torch=={recipe.torch_pin}":
            public = recipe.torch_pin.split("+")[0]
            raise EnvInstallError(
                requirement,
                f"its pinned torch=={recipe.torch_pin} cannot be had here (no index or "
                f"find-links offers it); use --torch-build generic to install torch {public}'s "
                "generic build instead (recorded in the env and in every result)",
                log_path,
            )
        raise EnvInstallError(requirement, classify(text, 1, req), log_path)
    return recipe, release


def create(
    requirement: str,
    root: Path | str | None = None,
    force: bool = False,
    timeout_s: float = 3600.0,
    torch_build: str | None = None,
) -> Path:
    """Create (or reuse) the env for ``requirement``; returns its python. ``torch_build``:
    "pinned" (the torch build the release pins), "generic" (the same torch version's generic
    build), None (a ready env as it was built; else pinned)."""
    requirement = normalize(requirement)
    if torch_build is not None and torch_build not in TORCH_BUILDS:
        raise ConfigError(f"--torch-build {torch_build!r}: one of {', '.join(TORCH_BUILDS)}")
    name = env_name(requirement)
    base = env_root(root)
    base.mkdir(parents=True, exist_ok=True)
    env_dir = base / name
    with env_lock(base, name):
        if not force and _ready(env_dir, requirement, torch_build):
            _say(f"{name}: ready (marker {env_dir / MARKER})")
            return env_python(env_dir)
        started = time.monotonic()
        log_path = base / f"{name}.install.log"
        log_path.write_text(f"# specperf env create {requirement} ({time.ctime()})\n")
        try:
            recipe, release = _resolve(requirement, torch_build or "pinned", log_path)
            old = dir_size(env_dir) if env_dir.exists() else 0
            check_disk(base, recipe, reclaim_bytes=old)
        except SpecperfError:
            _say(f"{name}: not built; nothing changed (log {log_path})")
            raise
        for note in recipe.notes:
            _say(f"{name}: {note}")
        if env_dir.exists():
            _say(f"{name}: removing an incomplete or outdated env")
            shutil.rmtree(env_dir)
        try:
            built = "generic" if recipe.torch_build == "generic" else "pinned"
            _build(recipe, env_dir, log_path, timeout_s, release, built)
        except BaseException:
            shutil.rmtree(env_dir, ignore_errors=True)
            _say(f"{name}: failed; removed; install log kept at {log_path}")
            raise
        shutil.move(str(log_path), env_dir / INSTALL_LOG)
        marker = read_marker(env_dir) or {}
        _say(
            f"{name}: ready in {time.monotonic() - started:.0f}s, "
            f"{(marker.get('size_bytes') or 0) / 2**30:.1f} GiB"
            + (f", torch build {marker['torch_build']}" if marker.get("torch_build") else "")
        )
        return env_python(env_dir)


def _build(
    recipe: EnvRecipe,
    env_dir: Path,
    log_path: Path,
    timeout_s: float,
    release: Release | None = None,
    torch_build: str = "pinned",
) -> None:
    req = recipe.requirement
    base_python = _base_python(recipe)
    _say(f"{recipe.name}: creating venv with {base_python}")
    _run_logged([base_python, "-m", "venv", str(env_dir)], log_path, "venv", 300, req)
    python = env_python(env_dir)
    pip = [str(python), "-m", "pip"]
    index = os.environ.get(recipe.extra_index_env) if recipe.extra_index_env else None
    extra = ["--extra-index-url", index] if index else []
    install = [*pip, "install", *recipe.install, *extra]
    _say(f"{recipe.name}: pip install {' '.join(recipe.install)[:300]} (log {log_path})")
    _run_logged(install, log_path, "install", timeout_s, req)
    if recipe.install_no_deps:
        _say(f"{recipe.name}: pip install --no-deps {' '.join(recipe.install_no_deps)}")
        _run_logged(
            [*pip, "install", "--no-deps", *recipe.install_no_deps, *extra],
            log_path, "install --no-deps", timeout_s, req,
        )  # fmt: skip
    if recipe.uninstall:
        _say(f"{recipe.name}: removing {' '.join(recipe.uninstall)} (known conflicts)")
        _run_logged([*pip, "uninstall", "-y", *recipe.uninstall], log_path, "uninstall", 600, req)
    if recipe.verify:
        _say(f"{recipe.name}: verifying by import")
        _run_logged([str(python), "-c", recipe.verify], log_path, "verify", 900, req)
    versions = json.loads(
        _capture(
            python,
            "import json, importlib.metadata as m\n"
            f"names = {list(recipe.versions)!r}\n"
            "out = {}\n"
            "for n in names:\n"
            "    try: out[n] = m.version(n)\n"
            "    except m.PackageNotFoundError: out[n] = None\n"
            "print(json.dumps(out))\n",
        )
    )
    freeze = _capture(
        python,
        "import subprocess, sys; subprocess.run([sys.executable, '-m', "
        "'pip', 'freeze', '--all'], check=True)",
    )
    marker = {
        "requirement": recipe.requirement,
        "kind": recipe.kind,
        "name": recipe.name,
        "recipe_digest": recipe.digest(),
        "recipe": asdict(recipe),
        "python": str(python),
        "python_version": _capture(
            python, "import platform; print(platform.python_version())"
        ).strip(),
        "versions": versions,
        "pip_freeze_sha256": hashlib.sha256(freeze.encode()).hexdigest(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "torch_build_requested": torch_build,
        **_release_fields(recipe, release, versions),
    }
    (env_dir / "pip-freeze.txt").write_text(freeze)
    marker["size_bytes"] = dir_size(env_dir)
    write_marker(env_dir, marker)  # last: its presence means "finished"

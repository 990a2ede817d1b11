"""An option's path value after a space (``--baselines-dir /path``, ``--suite PATH``) is not
taken for a test path: rootdir and ini file come from the project (specperf.rootdir)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.plugin.test_plugin import REPO, SUITE

pytest_plugins = ["pytester"]

PROJECT_INI = """
[tool.pytest.ini_options]
markers = ["owned: a marker only the project's ini file declares"]
"""

TEST = """
import pytest

@pytest.mark.owned
def test_marked():
    pass
"""


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    pytester.makefile(".toml", pyproject=PROJECT_INI)
    pytester.makepyfile(test_owned=TEST)
    pytester.makeconftest(
        "from tests.calibration.engine import register_calibration\nregister_calibration()\n"
    )
    return pytester


@pytest.mark.parametrize("option", ["--baselines-dir", "--results-dir", "--suite"])
def test_path_after_a_space_keeps_the_project_rootdir(
    project: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory, option: str
) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    value = elsewhere / "given"
    value.mkdir()
    if option == "--suite":  # a file: the suite must exist to be loaded
        value = value / "s.toml"
        value.write_text(SUITE)
    r = project.runpytest_subprocess(
        option, str(value), "-W", "error::pytest.PytestUnknownMarkWarning", "-q", "-rw"
    )
    assert r.ret == pytest.ExitCode.OK, r.outlines + r.errlines
    assert "PytestUnknownMarkWarning" not in r.stdout.str()
    ancestors = [elsewhere, value if value.is_dir() else value.parent]
    ancestors += [p for p in Path(elsewhere).parents if p in project.path.parents]
    assert not any((p / ".pytest_cache").exists() for p in ancestors)
    assert (project.path / ".pytest_cache").is_dir()


def test_header_names_the_project(project: pytest.Pytester, tmp_path: Path) -> None:
    other = tmp_path.parent / "other-baselines"
    other.mkdir(exist_ok=True)
    r = project.runpytest_subprocess("--baselines-dir", str(other), "-p", "no:cacheprovider")
    r.stdout.fnmatch_lines([f"rootdir: {project.path}", "configfile: pyproject.toml"])

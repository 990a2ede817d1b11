"""The architecture's import contracts (pyproject.toml [tool.importlinter], docs/architecture.md)
hold on the tree, and they can fail: a planted forbidden edge (engines importing the verdict, the
suite run importing the testkit) is caught. Runs import-linter's own CLI on a copy of the package,
so the real tree is never edited."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(tree / "pyproject.toml"), "--no-cache"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture()
def tree_copy(tmp_path: Path) -> Path:
    if not LINT_IMPORTS.exists():
        pytest.skip(f"import-linter missing ({LINT_IMPORTS}): pip install -e '.[dev]'")
    shutil.copytree(
        ROOT / "specperf", tmp_path / "specperf", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_tree_keeps_every_contract(tree_copy: Path) -> None:
    out = _lint(tree_copy)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 broken" in out.stdout


@pytest.mark.parametrize(
    ("module", "planted", "contract", "edge"),
    [
        (
            "engines/base.py",
            "specperf.verdict",
            "engines never import the verdict",
            "specperf.engines.base -> specperf.verdict",
        ),
        (
            "suite_run/runner.py",
            "specperf.testkit.models",
            "the product never imports the testkit",
            "specperf.suite_run.runner -> specperf.testkit.models",
        ),
    ],
)
def test_a_planted_forbidden_import_breaks_its_contract(
    tree_copy: Path, module: str, planted: str, contract: str, edge: str
) -> None:
    path = tree_copy / "specperf" / module
    path.write_text(path.read_text() + f"\nimport {planted}  # planted\n")
    out = _lint(tree_copy)
    assert out.returncode != 0, out.stdout
    assert contract in out.stdout
    assert "BROKEN" in out.stdout
    assert edge in out.stdout


def test_an_import_inside_a_function_breaks_the_testkit_contract(tree_copy: Path) -> None:
    """No product edge to the testkit is exempt, a lazy one neither: a function of pool that
    imports the test models is caught (the unplanted copy passes:
    test_the_tree_keeps_every_contract)."""
    path = tree_copy / "specperf" / "pool.py"
    planted = "def _planted():\n    import specperf.testkit.models\n\n    return 1\n"
    path.write_text(path.read_text() + "\n\n" + planted)
    out = _lint(tree_copy)
    assert out.returncode != 0, out.stdout
    assert "the product never imports the testkit" in out.stdout and "BROKEN" in out.stdout
    assert "specperf.pool -> specperf.testkit.models" in out.stdout


def test_importing_the_product_loads_no_testkit_module() -> None:
    """The product reaches the testkit only through entry points, loaded on first use (a
    `tiny:` name, the `model` subcommand): importing it loads no testkit module."""
    code = (
        "import sys\n"
        "import specperf.cli, specperf.config, specperf.modelid, specperf.pool\n"
        "import specperf.model_sources\n"
        "import specperf.plugin, specperf.report, specperf.suite_run, specperf.verdict\n"
        "print(sorted(m for m in sys.modules if m.startswith('specperf.testkit')))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"

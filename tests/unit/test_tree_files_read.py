"""Every file under tests/, fixtures/ and baselines/ but the test modules is read by code or a
test: its file name (or the name of a folder holding it, for a results tree read as a whole; or,
for a helper module, its dotted name) appears in the Python, TOML or shell sources of the
repository. A file nothing names is evidence left in the tree, not test data; delete it (git
keeps it) or write the test that reads it. Every prompt file of fixtures/ has its licence entry
in fixtures/LICENSES.md."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA_DIRS = ("tests", "fixtures", "baselines")
# package and plugin files that Python and pytest load by their role, not by name
BY_ROLE = {"__init__.py", "conftest.py", "py.typed"}
SOURCE_SUFFIXES = (".py", ".toml", ".sh", ".ini", ".cfg")


def tracked(*paths: str) -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files", "-z", "--", *paths], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    return [ROOT / p for p in out.split("\0") if p]


def _sources() -> dict[Path, str]:
    dirs = ("specperf", "tests", "scripts", "benchmarks", "conftest.py", "pyproject.toml")
    return {
        p: p.read_text(encoding="utf-8", errors="replace")
        for p in tracked(*dirs, "tox.ini", "docs/validation")
        if p.suffix in SOURCE_SUFFIXES and p.is_file()
    }


def unread(files: list[Path], sources: dict[Path, str]) -> list[str]:
    """The files whose name appears in no source but themselves, nor the name of a folder that
    holds them two or more levels down (``tests/fixtures_results/run-main``: a results tree read
    as a whole), nor, for a baseline file, its profile (the file's stem)."""
    out = []
    for f in files:
        rel = f.relative_to(ROOT)
        names = [rel.name, *(p.name for p in rel.parents if len(p.parts) > 2)]
        if rel.parts[0] == "baselines":
            names.append(rel.stem)
        if rel.suffix == ".py":
            names.append(".".join(rel.with_suffix("").parts))
        if rel.name in BY_ROLE:
            continue
        if not any(n in text for n in names for src, text in sources.items() if src != f):
            out.append(rel.as_posix())
    return out


def _data_files() -> list[Path]:
    """Data files and helper modules (tools, stand-ins, kits); test modules are pytest's."""
    return [
        f
        for f in tracked(*DATA_DIRS)
        if f.is_file() and not (f.suffix == ".py" and f.name.startswith("test_"))
    ]


def test_every_data_file_is_read_by_code_or_a_test() -> None:
    missing = unread(_data_files(), _sources())
    assert not missing, f"no code or test names these files: {missing}"


def test_an_unnamed_file_is_found() -> None:
    name = "-".join(("nothing", "reads", "this")) + ".bin"  # not spelled whole in any source
    planted = ROOT / "tests" / "data" / name
    named = ROOT / "fixtures" / "gsm8k.jsonl"
    assert unread([planted, named], _sources()) == [f"tests/data/{name}"]
    helper = "_".join(("nothing", "imports", "this")) + ".py"
    imported = ROOT / "tests" / "calibration" / "releases.py"  # named by its dotted name only
    assert unread([ROOT / "tests" / "tools" / helper, imported], _sources()) == [
        f"tests/tools/{helper}"
    ]


def _licence_table() -> str:
    return (ROOT / "fixtures" / "LICENSES.md").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "data", [p for p in tracked("fixtures") if p.suffix == ".jsonl"], ids=lambda p: p.name
)
def test_every_prompt_file_has_a_licence_entry(data: Path) -> None:
    """A row of LICENSES.md's table names the file (in backticks) and gives its licence."""
    rows = [r for r in _licence_table().splitlines() if r.startswith("|") and f"`{data.name}`" in r]
    assert rows, f"fixtures/LICENSES.md has no row for {data.name}"
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    assert len(cells) == 4 and re.search(r"(MIT|Apache-2\.0|BSD|CC)", cells[3]), rows[0]


def test_the_licence_table_names_only_files_that_exist() -> None:
    first = [r.strip("|").split("|")[0] for r in _licence_table().splitlines() if r.startswith("|")]
    named = set(re.findall(r"`([\w.-]+\.jsonl)`", " ".join(first)))
    present = {p.name for p in (ROOT / "fixtures").glob("*.jsonl")}
    assert named <= present, sorted(named - present)

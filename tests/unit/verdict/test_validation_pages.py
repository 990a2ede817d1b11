"""`specperf validation`: the committed docs/validation pages are exactly what the command
generates from baselines/*.json and docs/validation/inputs.toml (the CI check: a baseline or
verdict change that moves a figure fails here until the pages are regenerated); every committed
profile has a page; ``--check`` tells a stale page from a current one."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from specperf.cli import main
from specperf.errors import SpecperfError
from specperf.verdict import pages

ROOT = Path(__file__).resolve().parents[3]
PAGES = ROOT / "docs" / "validation"


@pytest.fixture(scope="module")
def generated() -> dict[str, str]:
    return pages.generate(ROOT, ROOT / pages.INPUTS, ROOT / pages.BASELINES)


def test_committed_pages_regenerate_byte_identical(generated: dict[str, str]) -> None:
    committed = {p.name: p.read_text(encoding="utf-8") for p in PAGES.glob("*.md")}
    assert set(committed) == set(generated), "regenerate with `specperf validation`"
    stale = [name for name, text in generated.items() if committed[name] != text]
    assert not stale, f"stale pages {stale}: regenerate with `specperf validation`"


def test_one_page_per_committed_profile(generated: dict[str, str]) -> None:
    profiles = {p.stem for p in (ROOT / "baselines").glob("*.json")}
    assert {Path(n).stem for n in generated} == profiles
    for text in generated.values():
        assert text.startswith(pages.GENERATED + "\n")
        assert "Baseline gates armed: " in text and "## False-alarm rate and power" in text


def test_pages_say_what_the_cpu_profile_gates(generated: dict[str, str]) -> None:
    text = generated["cpu-amd-epyc-avx512-2c.md"]
    rows = [r for r in text.splitlines() if r.startswith("| tiny-qwen3/vllm/native/mt-bench/c1")]
    cells = [[c.strip() for c in r.strip("|").split("|")] for r in rows]
    gate = {c[1]: c[3] for c in cells if len(c) == 4}
    assert gate["output_tokens"] == "gated"
    assert gate["output_throughput_tok_s"].startswith("report-only: baseline starts from 1 ")
    assert "| false alarm |" in text


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    shutil.copytree(ROOT / "baselines", root / "baselines")
    shutil.copytree(PAGES, root / "docs" / "validation")
    return root


def test_check_fails_on_a_changed_missing_or_extra_page(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    root = _tree(tmp_path)
    assert main(["validation", "--root", str(root), "--check"]) == 0
    page = root / "docs" / "validation" / "nvidia-h200x1.md"
    page.write_text(page.read_text(encoding="utf-8") + "edited\n", encoding="utf-8")
    (root / "docs" / "validation" / "old-profile.md").write_text("x\n", encoding="utf-8")
    (root / "docs" / "validation" / "nvidia-l40x1.md").unlink()
    capsys.readouterr()
    assert main(["validation", "--root", str(root), "--check"]) == 1
    out = capsys.readouterr().out
    assert "nvidia-h200x1.md: differs" in out
    assert "nvidia-l40x1.md: missing" in out and "old-profile.md: no profile" in out
    assert main(["validation", "--root", str(root)]) == 0  # writes the pages again
    (root / "docs" / "validation" / "old-profile.md").unlink()
    assert main(["validation", "--root", str(root), "--check"]) == 0


def test_a_baseline_file_without_inputs_is_an_error(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    shutil.copy(root / "baselines" / "nvidia-l40x1.json", root / "baselines" / "new-gpu.json")
    with pytest.raises(SpecperfError, match=r"no \[profiles.new-gpu\]"):
        pages.generate(root, root / pages.INPUTS, root / "baselines")

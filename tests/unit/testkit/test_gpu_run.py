"""``specperf gpu-night`` (specperf.testkit.gpu_night): the roofline uses the bandwidth of the GPU
it ran on, not one card's for every card; pass, verdict and FIT-MAL lines; the module runs as
``python -m specperf.testkit.gpu_night`` from the repository root."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest


@pytest.mark.parametrize(
    ("name", "tb_s"),
    [
        ("NVIDIA H200", 4.8),
        ("NVIDIA GH200 480GB", None),  # 4.0 or 4.9 TB/s by memory: not guessed
        ("NVIDIA H100 80GB HBM3", 3.35),
        ("NVIDIA H100 PCIe", 2.0),
        ("NVIDIA H100 NVL", 3.9),
        ("NVIDIA A100-SXM4-80GB", 2.039),
        ("NVIDIA A100-SXM4-40GB", 1.555),
        ("NVIDIA L40S", 0.864),
        ("NVIDIA GeForce RTX 4090", None),
    ],
)
def test_the_roofline_bandwidth_is_the_gpus_own(
    gpu_run: ModuleType, name: str, tb_s: float | None
) -> None:
    bw = gpu_run.hardware.hbm_bytes_per_s(name)
    assert (bw / 1e12 if bw else None) == tb_s


def _pass_with_native(tmp_path: Path) -> dict[str, Any]:
    """One pass holding one item's summary (its figures come from a patched item_figures)."""
    item = tmp_path / "transformers-native-gsm8k-c1"
    item.mkdir()
    (item / "summary.json").write_text("{}")
    return {
        "pass": "check",
        "results_dir": str(tmp_path),
        "exit_code": 0,
        "seconds": 1.0,
        "samples": [],
        "sampler_error": None,
    }


def test_no_roofline_without_a_known_bandwidth(
    gpu_run: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fig = {"method": "native", "weight_bytes": 16.38e9, "decode_tok_s_p50": 112.0}
    monkeypatch.setattr(gpu_run.figures, "item_figures", lambda s: dict(fig, engine_pid=None))
    monkeypatch.setattr(gpu_run.figures, "verdict_lines", lambda *a, **k: [])
    p = _pass_with_native(tmp_path)
    assert gpu_run.figures.collect([p], None)["check"]["roofline"] is None
    roof = gpu_run.figures.collect([p], 3.35e12)["check"]["roofline"]
    assert roof["hbm_tb_s"] == 3.35
    assert roof["native_share"] == pytest.approx(112.0 / (3.35e12 / 16.38e9))


def test_a_pass_cut_at_its_time_limit_says_so(gpu_run: ModuleType, tmp_path: Path) -> None:
    """A pass stopped by --budget-s mid-item says it was cut, not "no checks recorded" as if
    nothing had run."""
    (tmp_path / "transformers-loop-native-gsm8k-c1").mkdir()
    (tmp_path / "transformers-loop-native-gsm8k-c1" / "summary.json").write_text("{}")
    cut = gpu_run.verdicts.verdict_lines(tmp_path, "update", stopped=True)
    plain = gpu_run.verdicts.verdict_lines(tmp_path, "update")
    assert len(cut) == 1 and "stopped at its time limit" in cut[0]
    assert "NOT EVALUATED" in cut[0] and "PASS" not in cut[0]
    assert "no checks recorded" in plain[0]


def test_a_pass_with_no_item_results_still_has_a_verdict_line(
    gpu_run: ModuleType, tmp_path: Path
) -> None:
    (cut,) = gpu_run.verdicts.verdict_lines(tmp_path, "update", stopped=True)
    assert cut.startswith("VERDICT update: NOT EVALUATED") and "time limit" in cut
    (empty,) = gpu_run.verdicts.verdict_lines(tmp_path, "check")
    assert empty.startswith("VERDICT check: NOT EVALUATED") and "no item wrote results" in empty


def test_an_engine_wide_fail_gets_its_own_verdict_line(gpu_run: ModuleType, tmp_path: Path) -> None:
    """An item whose checks all passed while the engine-wide check, judged by the controller at
    the end of the pass, failed: the engine-wide check (verdict.json, no item) has its own
    VERDICT line, so the red pass does not read as PASS; an item's checks are not repeated
    there."""
    item = "transformers-loop-native-gsm8k-c1"
    key = "qwen3-8b-shape/transformers-loop/native/gsm8k/c1/greedy"
    (tmp_path / item).mkdir()
    (tmp_path / item / "summary.json").write_text("{}")
    tok = {"key": key, "item": item, "metric": "output_throughput_tok_s", "status": "pass"}
    tok |= {"measured": 99.32, "baseline": 106.5, "delta": -0.067}
    (tmp_path / "verdicts.jsonl").write_text(json.dumps(tok) + "\n")
    engine = {"key": "engine transformers-loop", "item": None, "status": "fail"}
    engine |= {"metric": "engine-wide output_throughput_tok_s", "measured": 0.9328}
    engine |= {"baseline": 1.0, "delta": -0.067, "message": "engine-wide p=0.00091 [FAIL]"}
    checks = [tok, engine]
    (tmp_path / "verdict.json").write_text(json.dumps({"counts": {}, "checks": checks}))
    lines = gpu_run.verdicts.verdict_lines(tmp_path, "check")
    assert len(lines) == 2, lines
    assert lines[0].startswith(f"VERDICT check {item}: PASS (1 checks)")
    assert lines[1].startswith("VERDICT check engine transformers-loop: FAIL (1 of 1 checks")
    assert "engine-wide output_throughput_tok_s 0.9328 vs 1 (-6.7%)" in lines[1]
    assert "p=0.00091" in lines[1]


def test_a_cut_pass_is_read_from_its_item_verdicts(gpu_run: ModuleType, tmp_path: Path) -> None:
    """A pass stopped before the controller wrote verdict.json has only verdicts.jsonl, and a kill
    mid-append leaves a torn last line: the items that ended still get their lines."""
    item = "transformers-loop-native-gsm8k-c1"
    (tmp_path / item).mkdir()
    (tmp_path / item / "summary.json").write_text("{}")
    tok = {"key": "k", "item": item, "metric": "output_throughput_tok_s", "status": "fail"}
    tok |= {"measured": 90.0, "baseline": 106.5, "delta": -0.155, "message": "tok/s [FAIL]"}
    (tmp_path / "verdicts.jsonl").write_text(json.dumps(tok) + '\n{"key": "k", "ite')
    (line,) = gpu_run.verdicts.verdict_lines(tmp_path, "check", stopped=True)
    assert line.startswith(f"VERDICT check {item}: FAIL (1 of 1 checks failed)"), line
    assert "tok/s [FAIL]" in line


def test_fit_mal_lines_compare_every_start_with_the_fit(gpu_run: ModuleType) -> None:
    """The fitted head covers the suite's measured prompts: each start's MAL must be the
    fit-time MAL, and a start that is not says DIFFERS (e.g. an item sized to another count)."""
    size = {"configured_requests": 12, "requests": 12, "source": "suite"}
    eagle = {"method": "eagle3", "num_requests": 12, "sizing": size, "mal_per_start": [4.0, 4.0]}
    items = {
        "transformers-eagle3-gsm8k-c1": eagle,
        "transformers-native-gsm8k-c1": {"method": "native", "mal_per_start": [None]},
    }
    (line,) = gpu_run.verdicts.fit_mal_lines("check", items, 4.0)
    assert line.startswith("FIT-MAL check transformers-eagle3-gsm8k-c1: EQUAL;")
    assert "[4.0, 4.0] vs fit-time 4.0 on 12 requests (suite: suite 12)" in line
    grown = {**eagle, "num_requests": 24, "mal_per_start": [2.005, 2.005]}
    grown["sizing"] = {"configured_requests": 12, "requests": 24, "source": "measured"}
    (line,) = gpu_run.verdicts.fit_mal_lines("check", {"e": grown}, 4.0)
    assert "DIFFERS" in line and "on 24 requests (measured: suite 12)" in line
    (line,) = gpu_run.verdicts.fit_mal_lines(
        "check", {"e": {**eagle, "mal_per_start": [4.0, 3.9]}}, 4.0
    )
    assert "DIFFERS" in line
    (line,) = gpu_run.verdicts.fit_mal_lines("check", {"e": eagle}, None)
    assert "NOT EVALUATED" in line and "EQUAL" not in line


def test_passes_name_the_steps_and_each_step_prints_its_wall_time(
    gpu_run: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """``--passes fit`` is a step of its own (the head, no pytest pass); unknown names are a
    usage error; every step prints ``STEP <name>: <s> s`` and a failed fit fails the step."""
    ran: list[str] = []

    def fake_fit(args: Any, models_dir: Path) -> dict[str, Any]:
        ran.append("fit")
        return {"exit_code": fake_fit.code, "seconds": 0.1, "fit_time_mal": 4.0}

    fake_fit.code = 0  # type: ignore[attr-defined]
    monkeypatch.setattr(gpu_run.cli, "prepare_eagle3_head", fake_fit)
    monkeypatch.setattr(gpu_run.cli, "run_pass", lambda *a, **k: ran.append("pass") or {})
    base = ["gpu_run.py", "--out", str(tmp_path / "o"), "--shapes", "tiny", "--device", "cpu"]
    base += ["--models-dir", str(tmp_path / "m"), "--work", str(tmp_path / "w")]
    monkeypatch.setattr("sys.argv", [*base, "--passes", "fit"])
    assert gpu_run.cli.main() == 0
    out = capsys.readouterr().out
    assert ran == ["fit"]
    for name in ("models", "fit", "total"):
        assert f"STEP {name}: " in out
    report = json.loads((tmp_path / "o" / "gpu_run.json").read_text())
    assert {"models", "fit"} <= set(report["steps"])
    fake_fit.code = 1  # type: ignore[attr-defined]
    assert gpu_run.cli.main() == 1
    monkeypatch.setattr("sys.argv", [*base, "--passes", "fit,chekc"])
    assert gpu_run.cli.main() == 2
    err = capsys.readouterr().err
    assert "specperf gpu-night: error: --passes fit,chekc: chekc: not one of" in err


def test_only_the_baseline_files_a_pass_changed_come_back(
    gpu_run: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A baselines folder seeded by ``cp`` just before the run has fresh mtimes everywhere: the
    files copied to OUT are the ones whose content the update pass changed (a device call
    brings back at most 8 files)."""
    bl = tmp_path / "bl"
    bl.mkdir()
    for name in ("a.json", "b.json"):
        (bl / name).write_text('{"entries": {}}\n')

    def fake_pass(name: str, args: Any, models_dir: Path, results: Path, log: Path) -> dict:
        results.mkdir(parents=True)
        (bl / "b.json").write_text('{"entries": {"k": {}}}\n')
        return {"pass": name, "exit_code": 0, "seconds": 0.0, "results_dir": str(results)}

    monkeypatch.setattr(gpu_run.cli, "run_pass", fake_pass)
    monkeypatch.setattr(gpu_run.cli, "collect", lambda passes, hbm: {})
    out = tmp_path / "o"
    argv = ["gpu_run.py", "--out", str(out), "--shapes", "tiny", "--device", "cpu"]
    argv += ["--models-dir", str(tmp_path / "m"), "--work", str(tmp_path / "w")]
    argv += ["--baselines-dir", str(bl), "--passes", "update", "--eagle3-head", "none"]
    monkeypatch.setattr("sys.argv", argv)
    assert gpu_run.cli.main() == 0
    assert sorted(p.name for p in out.glob("baseline-*")) == ["baseline-b.json"]


def test_gpu_night_dry_run_on_cpu(tmp_path: Path, capsys: Any) -> None:
    """``specperf gpu-night --shapes tiny --device cpu`` end to end, through the CLI: configs
    built, an update pass writes the profile's baseline file (the one file copied back), a check
    pass judges against it, each step prints its wall time and each pass its VERDICT line. The
    GPU suite made small for a unit test (4 requests x 16 tokens, float32, native only; the head
    fit on CPU is test_eagle3_fitted_sizing's)."""
    from specperf.cli import main

    root = Path(__file__).resolve().parents[3]
    text = (root / "specperf" / "suites" / "h200-transformers.toml").read_text()
    for old, new in (
        ("requests = [12]", "requests = [4]"),
        ("max_tokens = 128", "max_tokens = 16"),
        ('dtype = "bfloat16"', 'dtype = "float32"'),
    ):
        assert old in text
        text = text.replace(old, new)
    suite = tmp_path / "small.toml"
    suite.write_text(text)
    out, bl = tmp_path / "out", tmp_path / "baselines"
    bl.mkdir()
    argv = ["gpu-night", "--out", str(out), "--suite", str(suite), "--shapes", "tiny"]
    argv += ["--device", "cpu", "--eagle3-head", "none", "--passes", "update,check"]
    argv += ["--models-dir", str(tmp_path / "models"), "--work", str(tmp_path / "work")]
    argv += ["--baselines-dir", str(bl), "--budget-s", "500"]
    # three starts per pass: the fewest a baseline gate needs (an item judged by nothing fails)
    argv += ["--", "--engine", "transformers", "--method", "native", "--repeat", "3"]
    argv += ["--hardware-profile", "cpu-gpu-night-dry-run"]
    code = main(argv)
    printed = capsys.readouterr().out
    assert code == 0, printed[-3000:]
    for name in ("models", "pass update", "pass check", "total"):
        assert f"STEP {name}: " in printed
    assert "STEP fit" not in printed  # --eagle3-head none: no fit
    item = "transformers-native-gsm8k-c1"
    for name in ("update", "check"):
        assert f"VERDICT {name} {item}: " in printed
    report = json.loads((out / "gpu_run.json").read_text())
    assert {"models", "pass update", "pass check"} <= set(report["steps"])
    assert report["passes"]["check"]["items"][item]["num_requests"] == 4
    assert [p.name for p in out.glob("baseline-*")] == ["baseline-cpu-gpu-night-dry-run.json"]
    assert (bl / "cpu-gpu-night-dry-run.json").exists()


def test_the_module_runs_from_the_repository_root(tmp_path: Path) -> None:
    """``python -m specperf.testkit.gpu_night`` from the repository root is ``specperf gpu-night``
    where specperf is not installed (bare CUDA images): the same options and errors, without
    importing the other subcommands' modules."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[3]
    probe = (
        "import json, runpy, sys\n"
        "try:\n"
        "    runpy.run_module('specperf.testkit.gpu_night', run_name='__main__', alter_sys=True)\n"
        "    code = 0\n"
        "except SystemExit as exc:\n"
        "    code = exc.code\n"
        "others = ('specperf.report', 'specperf.history', 'specperf.release_watch')\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(others))))\n"
        "sys.exit(code)\n"
    )
    for argv, rc, text in (
        (["--help"], 0, "specperf gpu-night --out night --passes check"),
        (["--out", str(tmp_path), "--passes", "bogus"], 2, "error: --passes bogus: bogus"),
    ):
        r = subprocess.run(
            [sys.executable, "-c", probe, *argv],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=root,
        )
        assert r.returncode == rc, r.stderr[-2000:]
        assert text in r.stdout + r.stderr
        assert r.stdout.strip().splitlines()[-1] == "[]"


def test_an_item_cut_short_keeps_its_first_starts_figures(gpu_run: ModuleType) -> None:
    """A pass stopped by its budget leaves the running item with its first start's own summary
    (``repeats`` is the planned count): its figures are read and marked, not a crash."""
    start = {"method": "eagle3", "mean_acceptance_length": 2.5, "repeats": 3}
    fig = gpu_run.figures.item_figures(start)
    assert fig["interrupted"] is True and fig["mal_per_start"] == [] and fig["mal"] == 2.5
    done = dict(start, repeats=[{"mean_acceptance_length": m} for m in (2.4, 2.5, 2.6)])
    fig = gpu_run.figures.item_figures(done)
    assert fig["interrupted"] is False and fig["mal_per_start"] == [2.4, 2.5, 2.6]
    fig = gpu_run.figures.item_figures({"method": "eagle3", "mean_acceptance_length": 2.5})
    assert fig["interrupted"] is False and fig["mal_per_start"] == []

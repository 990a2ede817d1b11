"""The pytest plugin end to end with pytester and the calibration engine (real server processes
on loopback, started through the same engine pool the GPU suites use): options, ids, ordering,
missing/strict/stale baselines, updates (also with 2 xdist workers), devices per worker, engine
starts per spec per worker, repeats, one-at-a-time, cross-engine rules and benchmark JSON."""

from __future__ import annotations

import itertools
import json
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from specperf.plugin import group_scope

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[3]
MATRIX = (REPO / "tests" / "perf" / "test_matrix.py").read_text()

ARM = ("--repeat", "3", "--restart-between-repeats")  # the starts that arm a baseline gate
SUITE = """
[suite]
name = "cal"
baseline_file = "cal"

[settings]
speed = "1.0"
max_tokens = "24"

[engines.cal]
kind = "calibration"
startup_timeout_s = 60
options = { step_ms = 3, ttft_ms = 5, output_tokens = 24, speed = "${speed}" }

[models.m]
path = "calibration-model"

[models.m.methods.eagle3]
draft = "calibration-draft"
num_speculative_tokens = 3
options = { accept_pattern = "3,2,1" }

[datasets.mt-bench]

[sweep]
concurrency = [1, 2]
requests = [4, 4]

[output]
max_tokens = 24

[workload]
warmup_requests = 1

[metrics.output_throughput_tok_s]
gate = "never"

[[rules]]
id = "eagle3-faster"
kind = "speedup"
method = "eagle3"
min = 1.2
"""

TWO_ENGINES = (
    SUITE
    + """
[engines.cal2]
kind = "calibration"
startup_timeout_s = 60
options = { step_ms = 3, ttft_ms = 5, output_tokens = 24 }
"""
)


@pytest.fixture
def perf(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.setenv("SPECPERF_RUNTIME_DIR", str(tmp_path / "runtime"))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    # when this unit suite itself runs under xdist, the inner pytest must not think it is
    # one of the outer run's workers (it would take that worker's devices)
    for var in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(var, raising=False)
    pytester.makeconftest(
        "from tests.calibration.engine import register_calibration\nregister_calibration()\n"
    )
    pytester.makefile(".toml", suite=SUITE, two=TWO_ENGINES)
    pytester.makepyfile(test_perf_matrix=MATRIX)
    return pytester


def run(pt: pytest.Pytester, *args: str, suite: str = "suite.toml") -> pytest.RunResult:
    return pt.runpytest_subprocess(
        "-m",
        "perf",
        "--suite",
        suite,
        "-p",
        "no:cacheprovider",
        "-rsxX",
        "--benchmark-disable",
        *args,
        timeout=600,
    )


def baseline(pt: pytest.Pytester) -> dict:
    """The suite's baseline file: baselines/cal/<this machine's profile>.json (one per profile)."""
    (path,) = (pt.path / "baselines" / "cal").glob("*.json")
    return json.loads(path.read_text())["entries"]


def starts(results: Path) -> list[dict]:
    lines = (results / "engine-starts.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["event"] == "start"]


def test_collect_ids_order_and_filters(perf):
    r = perf.runpytest_subprocess("-m", "perf", "--suite", "suite.toml", "--collect-only", "-q")
    ids = [line.split("[", 1)[1].rstrip("]") for line in r.outlines if "::test_item[" in line]
    assert ids == [
        "cal-native-mt-bench-c1",
        "cal-native-mt-bench-c2",
        "cal-eagle3-mt-bench-c1",
        "cal-eagle3-mt-bench-c2",
    ]
    r = perf.runpytest_subprocess(
        "-m",
        "perf",
        "--suite",
        "two.toml",
        "--collect-only",
        "-q",
        "--method",
        "eagle3",
        "--concurrency",
        "2",
    )
    ids = [line.split("[", 1)[1].rstrip("]") for line in r.outlines if "::test_item[" in line]
    assert ids == ["cal-eagle3-mt-bench-c2", "cal2-eagle3-mt-bench-c2"]


def test_bad_options_and_files_are_one_line_errors(perf):
    r = perf.runpytest_subprocess("-m", "perf", "--suite", "suite.toml", "--concurrency", "x")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*--concurrency x: expected integers*"])
    perf.makefile(".toml", broken="[suite]\nname = 3\n")
    r = perf.runpytest_subprocess("-m", "perf", "--suite", "broken.toml")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*broken.toml: suite.name: expected a string, got int 3*"])
    r = perf.runpytest_subprocess("-m", "perf", "--suite", "suite.toml", "--setting", "nope=1")
    r.stderr.fnmatch_lines(["*--setting nope: *has no such setting*"])


def test_perf_items_need_m_perf(perf):
    r = perf.runpytest_subprocess("-p", "no:cacheprovider", "--suite", "suite.toml")
    r.stdout.fnmatch_lines(["*4 deselected*"])
    assert r.ret == pytest.ExitCode.NO_TESTS_COLLECTED


def test_missing_strict_update_then_pass(perf):
    res = perf.path / "r1"
    r = run(perf, "--results-dir", str(res))
    r.assert_outcomes(skipped=4)
    r.stdout.fnmatch_lines(
        [
            "*specperf verdict*",
            "*baseline: missing: no baseline for profile *; adopt with --update-baselines*",
            "*adopt a baseline with: pytest -m perf --suite suite.toml "
            "-k cal-native-mt-bench-c1 --update-baselines=missing*",
        ]
    )
    # no baseline, yet the portable rule is judged (and here holds)
    r.stdout.fnmatch_lines(["*rule:eagle3-faster*PASS"])
    judged = json.loads((res / "verdict.json").read_text())["checks"]
    assert {c["status"] for c in judged if c.get("rule") == "eagle3-faster"} == {"pass"}
    r = run(perf, "--results-dir", str(perf.path / "r2"), "--strict-baselines")
    r.assert_outcomes(failed=4)

    # three starts: the least evidence that arms a gate (one start would only report)
    r = run(perf, "--results-dir", str(perf.path / "r3"), "--update-baselines", *ARM)
    r.assert_outcomes(passed=4)
    entries = baseline(perf)
    assert sorted(entries) == sorted(
        f"m/cal/{m}/mt-bench/c{c}/greedy" for m in ("native", "eagle3") for c in (1, 2)
    )
    e = entries["m/cal/eagle3/mt-bench/c2/greedy"]
    assert e["metrics"]["mean_acceptance_length"]["value"] > 2.0
    assert e["provenance"]["source"] == "measured" and e["fingerprint"]["num_requests"] == 4

    res = perf.path / "r4"
    r = run(perf, "--results-dir", str(res), "--strict-baselines")
    r.assert_outcomes(passed=4)
    # the verdict table: one block per item (its id on its own line), then its rows
    r.stdout.fnmatch_lines(["cal-eagle3-mt-bench-c2", "  mean_acceptance_length*PASS"])
    r.stdout.fnmatch_lines(["*rule:eagle3-faster*PASS"])
    summary = json.loads((res / "cal-eagle3-mt-bench-c2" / "summary.json").read_text())
    assert summary["key"] == "m/cal/eagle3/mt-bench/c2/greedy"
    assert summary["environment"]["hardware_profile_overridden"] is False  # detected
    assert summary["figures"]["output_throughput_tok_s"]["interval"]
    verdict = json.loads((res / "verdict.json").read_text())
    assert verdict["counts"]["pass"] > 0 and "fail" not in verdict["counts"]
    # one engine start per spec (native, eagle3) for the whole session
    assert Counter(s["method"] for s in starts(res)) == {"native": 1, "eagle3": 1}

    # a filtered strict run: native left out, so the speedup rule cannot be judged; that is
    # the run's scope (report-only, said in the table), not a red item
    res = perf.path / "r5"
    r = run(perf, "--results-dir", str(res), "--strict-baselines", "--method", "eagle3")
    r.assert_outcomes(passed=2)
    r.stdout.fnmatch_lines(["*rule:eagle3-faster*NOT EVALUATED*", "*not selected in this run*"])
    snap = json.loads((res / "suite.json").read_text())
    assert snap["selected"] == [f"m/cal/eagle3/mt-bench/c{c}/greedy" for c in (1, 2)]
    # the filtered run records the whole matrix's levels (a later verdict decides with them)
    full = json.loads((perf.path / "r4" / "suite.json").read_text())
    assert snap["alpha"] == full["alpha"] and 0 < snap["alpha"]["item"] < 0.005


def test_regression_fails_with_a_full_message(perf):
    run(
        perf,
        "--results-dir",
        str(perf.path / "r1"),
        "--update-baselines",
        *ARM,
        "--method",
        "eagle3",
        "--concurrency",
        "2",
    )
    perf.makefile(".toml", slow=SUITE.replace('accept_pattern = "3,2,1"', 'accept_pattern = "1"'))
    r = run(
        perf,
        "--results-dir",
        str(perf.path / "r2"),
        "--method",
        "eagle3",
        "--concurrency",
        "2",
        suite="slow.toml",
    )
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(
        [
            "*m/cal/eagle3/mt-bench/c2/greedy: mean_acceptance_length; * vs baseline * "
            "(-*%, tolerance -5.0%)*engine 0.0.0+calibration (baseline 0.0.0+calibration)*[FAIL]*",
        ]
    )


def test_stale_fingerprint_is_reported_not_compared(perf):
    run(
        perf,
        "--results-dir",
        str(perf.path / "r1"),
        "--update-baselines",
        "--method",
        "native",
        "--concurrency",
        "1",
    )
    perf.makefile(".toml", changed=SUITE.replace("max_tokens = 24", "max_tokens = 20"))
    r = run(
        perf,
        "--results-dir",
        str(perf.path / "r2"),
        "--method",
        "native",
        "--concurrency",
        "1",
        suite="changed.toml",
    )
    # a stale entry judges nothing and no rule judged the native item: it fails and says why
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(
        ["*judged by nothing*fingerprint differs (*max_tokens: 24 → 20*not compared*"]
    )


def test_update_missing_and_failed_modes(perf):
    run(
        perf, "--results-dir", str(perf.path / "r1"), "--update-baselines", *ARM,
        "--concurrency", "1",
    )  # fmt: skip
    before = baseline(perf)
    assert len(before) == 2
    run(perf, "--results-dir", str(perf.path / "r2"), "--update-baselines=missing", *ARM)
    after = baseline(perf)
    assert len(after) == 4
    for k, v in before.items():
        assert after[k] == v  # existing entries untouched
    perf.makefile(".toml", slow=SUITE.replace('accept_pattern = "3,2,1"', 'accept_pattern = "1"'))
    # one concurrency: an entry rewritten by this mode would otherwise pool its new start
    # into its config sibling's spread before the sibling is judged
    r = run(
        perf, "--results-dir", str(perf.path / "r3"), "--update-baselines=failed",
        "--concurrency", "1", suite="slow.toml",
    )  # fmt: skip
    r.assert_outcomes(passed=2)
    final = baseline(perf)
    changed = {k for k in final if final[k] != after[k]}
    assert changed == {"m/cal/eagle3/mt-bench/c1/greedy"}


def test_two_workers_disjoint_devices_one_start_per_spec_and_merge(perf):
    res = perf.path / "r1"
    r = run(perf, "-n", "2", "--results-dir", str(res), "--update-baselines", suite="two.toml")
    r.assert_outcomes(passed=8)
    assert len(baseline(perf)) == 8  # both workers' entries kept
    rows = starts(res)
    by_worker: dict[str, list[dict]] = {}
    for s in rows:
        by_worker.setdefault(s["worker"], []).append(s)
    assert sorted(by_worker) == ["gw0", "gw1"]
    cpus = [set(v[0]["devices"]["cpus"]) for v in by_worker.values()]
    assert cpus[0] and cpus[1] and not cpus[0] & cpus[1]
    for v in by_worker.values():
        digests = [s["spec_digest"] for s in v]
        assert len(digests) == len(set(digests)) == 2  # one start per spec on this worker
        assert len({s["label"] for s in v}) == 1  # a (model, engine) group stays on one worker
        assert [s["method"] for s in v] == ["native", "eagle3"]  # native first


def test_an_update_that_stores_a_gate_that_cannot_fail_says_so_at_the_end(perf):
    """A draft that accepts almost nothing (MAL 24/23 = 1.043 against the default 5 %
    tolerance: a drop to 0.99 cannot happen) is stored report-only, and the end of the run
    says so in the controller's terminal, also when the item ran on an xdist worker whose log
    is not shown."""
    weak = SUITE.replace('accept_pattern = "3,2,1"', 'accept_pattern = "' + "0," * 21 + '1"')
    weak = weak[: weak.index("[[rules]]")]
    perf.makefile(".toml", weak=weak)
    res = perf.path / "r1"
    args = ("-n", "2", "--results-dir", str(res), "--update-baselines", "--method", "eagle3")
    args += ("--hardware-profile", "weak-hw")
    r = run(perf, *args, suite="weak.toml")
    r.assert_outcomes(passed=2)
    r.stdout.fnmatch_lines(
        [
            "*specperf:*",
            "WARNING cal-eagle3-mt-bench-c*: mean_acceptance_length stored "
            "report-only: MAL 1.0* with tolerance 5.0%*MAL never falls below 1*",
        ]
    )
    mal = baseline(perf)["m/cal/eagle3/mt-bench/c1/greedy"]["metrics"]["mean_acceptance_length"]
    assert "MAL never falls below 1" in mal["report_only"]
    summary = json.loads((res / "cal-eagle3-mt-bench-c1" / "summary.json").read_text())
    assert summary["environment"]["hardware_profile"] == "weak-hw"
    assert summary["environment"]["hardware_profile_overridden"] is True


def test_gpus_are_pinned_per_worker_before_tests_run(perf, monkeypatch):
    """Each worker's own process sees only its GPU (set before any test module is imported),
    and its engines get the same CUDA_VISIBLE_DEVICES."""
    perf.makepyfile(
        test_env="""
        import os, pathlib
        SEEN_AT_IMPORT = os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>")
        def test_env():
            worker = os.environ.get("PYTEST_XDIST_WORKER", "master")
            out = pathlib.Path(os.environ["ENV_OUT"]) / worker
            out.write_text(SEEN_AT_IMPORT)
    """
    )
    out = perf.path / "env"
    out.mkdir()
    monkeypatch.setenv("ENV_OUT", str(out))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6,7")  # indexed into, never replaced
    perf.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "-n",
        "2",
        "--dist",
        "each",
        "test_env.py",
        "--suite",
        "suite.toml",
    )
    assert {p.name: p.read_text() for p in out.iterdir()} == {"gw0": "4", "gw1": "5"}
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    res = perf.path / "r1"
    run(
        perf,
        "-n",
        "2",
        "--gpus",
        "6,7",
        "--results-dir",
        str(res),
        "--method",
        "native",
        suite="two.toml",
    )
    assert sorted(s["devices"]["gpus"][0] for s in starts(res)) == ["6", "7"]
    r = run(perf, "-n", "2", "--gpus", "6", "--method", "native", suite="two.toml")
    r.stdout.fnmatch_lines(["*2 worker(s) x 1 GPU(s) per engine need 2 GPUs, only 1 visible*"])


def test_repeat_takes_the_median(perf):
    res = perf.path / "r1"
    r = run(
        perf, "--results-dir", str(res), "--repeat", "3", "--method", "eagle3", "--concurrency", "2"
    )
    r.assert_outcomes(skipped=1)
    item = res / "cal-eagle3-mt-bench-c2"
    summary = json.loads((item / "summary.json").read_text())
    fig = summary["figures"]["output_throughput_tok_s"]
    assert len(fig["samples"]) == 3 and fig["value"] == sorted(fig["samples"])[1]
    assert fig["interval"] == [min(fig["samples"]), max(fig["samples"])]
    assert (item / "repeat-2" / "summary.repeat.json").exists()
    assert (item / "repeat-3" / "requests.jsonl").exists()
    assert not (item / "repeat-2" / "summary.json").exists()
    assert len(starts(res)) == 1  # the engine stays up across repeats


def test_suite_repeat_sets_starts_per_item_and_repeat_overrides_it(perf):
    """[suite] repeat = N measures each item on N fresh starts when --repeat is not given (the
    H200 suite's three starts per run); --repeat on the command line wins."""
    perf.makefile(
        ".toml",
        thrice=SUITE.replace(
            'baseline_file = "cal"',
            'baseline_file = "cal"\nrepeat = 3\nrestart_between_repeats = true',
        ),
    )
    sel = ("--method", "native", "--concurrency", "1", "--update-baselines")
    res = perf.path / "suite-repeat"
    run(perf, "--results-dir", str(res), *sel, suite="thrice.toml").assert_outcomes(passed=1)
    fig = json.loads((res / "cal-native-mt-bench-c1" / "summary.json").read_text())["figures"]
    assert len(fig["output_throughput_tok_s"]["samples"]) == 3
    assert len(starts(res)) == 3
    res = perf.path / "cli-repeat"
    r = run(perf, "--results-dir", str(res), "--repeat", "1", *sel, suite="thrice.toml")
    r.assert_outcomes(passed=1)
    assert len(starts(res)) == 1
    r = run(perf, "--results-dir", str(perf.path / "zero"), "--repeat", "0", suite="thrice.toml")
    assert r.ret != 0  # 0 is an error named by its flag, not "not given"
    assert "--repeat 0: must be >= 1" in r.stdout.str() + r.stderr.str()


def test_restart_between_repeats_starts_a_fresh_engine_for_each(perf):
    res = perf.path / "r1"
    r = run(
        perf,
        "--results-dir",
        str(res),
        "--repeat",
        "3",
        "--restart-between-repeats",
        "--method",
        "native",
        "--concurrency",
        "1",
        "--update-baselines",
    )
    r.assert_outcomes(passed=1)
    assert len(starts(res)) == 3
    item = res / "cal-native-mt-bench-c1"
    pids = [
        json.loads(f.read_text())["environment"]["engine"]["pid"]
        for f in (item / "summary.json", *sorted(item.glob("repeat-*/summary.repeat.json")))
    ]
    assert len(set(pids)) == 3  # each repeat's summary records the engine that measured it
    stops = [json.loads(x) for x in (res / "engine-starts.jsonl").read_text().splitlines()]
    reasons = [x.get("reason") for x in stops if x["event"] == "stop"]
    assert reasons[:2] == ["fresh engine for repeat 2", "fresh engine for repeat 3"]
    (entry,) = baseline(perf).values() if isinstance(baseline(perf), dict) else baseline(perf)
    assert entry["provenance"]["sample_size"]["engine_starts"] == 3
    assert "each on a fresh engine start" in entry["provenance"]["how_measured"]


def test_one_at_a_time_never_overlaps_measurements(perf):
    res = perf.path / "r1"
    run(perf, "-n", "2", "--one-at-a-time", "--results-dir", str(res), suite="two.toml")
    spans = []
    for s in res.glob("*/summary.json"):
        wc = json.loads(s.read_text())["wall_clock"]
        spans.append((wc["started"], wc["finished"]))
    spans.sort()
    assert len(spans) == 8
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))


def test_cross_engine_rule_judged_at_session_end(perf):
    perf.makefile(
        ".toml",
        xe=TWO_ENGINES.replace(
            '[engines.cal2]\nkind = "calibration"\nstartup_timeout_s = 60\n'
            "options = { step_ms = 3, ttft_ms = 5, output_tokens = 24 }",
            '[engines.cal2]\nkind = "calibration"\nstartup_timeout_s = 60\n'
            "options = { step_ms = 3, ttft_ms = 5, output_tokens = 24, "
            "config = '{\"accept_pattern\": [1]}' }",
        )
        + textwrap.dedent("""
        [[rules]]
        id = "cal-vs-cal2"
        kind = "cross_engine"
        metric = "mean_acceptance_length"
        engine = "cal2"
        reference_engine = "cal"
        method = "eagle3"
        min = 0.9
    """),
    )
    res = perf.path / "r1"
    r = run(perf, "--results-dir", str(res), "--concurrency", "2", suite="xe.toml")
    assert r.ret == pytest.ExitCode.TESTS_FAILED
    r.stdout.fnmatch_lines(["*FAIL (judged at the end of the session)*cal-vs-cal2*"])
    checks = json.loads((res / "verdict.json").read_text())["checks"]
    assert any(c["rule"] == "cal-vs-cal2" and c["status"] == "fail" for c in checks)


def test_benchmark_json_carries_figures(perf):
    out = perf.path / "bench.json"
    perf.runpytest_subprocess(
        "-m",
        "perf",
        "--suite",
        "suite.toml",
        "-p",
        "no:cacheprovider",
        "--method",
        "native",
        "--concurrency",
        "1",
        f"--benchmark-json={out}",
        timeout=600,
    )
    data = json.loads(out.read_text())
    info = data["benchmarks"][0]["extra_info"]
    assert info["specperf_key"] == "m/cal/native/mt-bench/c1/greedy"
    assert info["output_throughput_tok_s"] > 0 and info["completed"] == 4


def test_group_scope():
    groups = {"vllm-native-mt-bench-c1": "m:vllm"}
    assert (
        group_scope("t.py::test_item[vllm-native-mt-bench-c1]", groups) == "specperf-group:m:vllm"
    )
    assert (
        group_scope("t.py::test_item[vllm-native-mt-bench-c1]@m:vllm", groups)
        == "specperf-group:m:vllm"
    )
    assert group_scope("t.py::test_other", groups) == "t.py::test_other"


def test_shards_keep_groups_whole_and_cover_everything(perf):
    seen = []
    for i in (1, 2):
        r = perf.runpytest_subprocess(
            "-m", "perf", "--suite", "two.toml", "--collect-only", "-q", "--shard", f"{i}/2"
        )
        ids = [ln.split("[", 1)[1].rstrip("]") for ln in r.outlines if "::test_item[" in ln]
        assert len({i.split("-")[0] for i in ids}) == 1  # one (model, engine) group per shard
        seen += ids
    assert len(seen) == len(set(seen)) == 8
    r = perf.runpytest_subprocess("-m", "perf", "--suite", "two.toml", "--shard", "3/2")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*--shard 3/2: INDEX must be between 1 and 2*"])


def test_workload_the_engine_refuses_is_a_skip_with_the_reason(perf):
    # an engine whose client refuses concurrency > 1 (as transformers' speculative paths do)
    perf.makefile(
        ".toml",
        capped=SUITE.replace(
            'options = { step_ms = 3, ttft_ms = 5, output_tokens = 24, speed = "${speed}" }',
            "options = { step_ms = 3, ttft_ms = 5, output_tokens = 24, max_concurrency = 1 }",
        ),
    )
    res = perf.path / "r1"
    r = run(
        perf,
        "--results-dir",
        str(res),
        "--method",
        "native",
        "--update-baselines",
        suite="capped.toml",
    )
    r.assert_outcomes(passed=1, skipped=1)
    r.stdout.fnmatch_lines(
        ["*not supported by this engine: calibration engine: concurrency 2 > max_concurrency 1*"]
    )
    assert (res / "cal-native-mt-bench-c1" / "summary.json").exists()
    assert not (res / "cal-native-mt-bench-c2").exists()  # refused before anything was measured
    assert list(baseline(perf)) and all("/c2/" not in k for k in baseline(perf))


def test_a_too_short_item_is_sized_once_and_its_baseline_fixes_the_count(perf):
    """On a machine where the suite's count is over in a fraction of the minimum duration, the
    update run measures the first start, finds it too short, keeps it under sizing/ and measures
    the item again with a whole multiple of the count; the entry stores that count and every
    later run sends it (same workload as the baseline). A later run that is still too short
    says how to size again."""
    perf.makefile(
        ".toml",
        sized=SUITE.replace('gate = "never"', 'gate = "always"').replace(
            "warmup_requests = 1", "warmup_requests = 1\nmin_duration_s = 1.0"
        ),
    )
    sel = ("--method", "native", "--concurrency", "1", "--suite", "sized.toml")
    res = perf.path / "update"
    r = run(perf, "--results-dir", str(res), *sel, "--update-baselines", *ARM)
    r.assert_outcomes(passed=1)
    item = res / "cal-native-mt-bench-c1"
    first = json.loads((item / "sizing" / "summary.sizing.json").read_text())
    summary = json.loads((item / "summary.json").read_text())
    n = summary["num_requests"]
    assert first["num_requests"] == 4 and first["duration_s"] < 1.0
    assert n > 4 and n % 4 == 0 and summary["duration_s"] >= 1.0
    assert summary["sizing"] == {
        "configured_requests": 4,
        "requests": n,
        "source": "measured",
        "first_duration_s": round(first["duration_s"], 3),
    }
    assert "sized to" in (res / "progress.log").read_text()
    (entry,) = baseline(perf).values()
    assert entry["fingerprint"]["num_requests"] == n

    res = perf.path / "check"
    run(perf, "--results-dir", str(res), *sel, "--strict-baselines").assert_outcomes(passed=1)
    item = res / "cal-native-mt-bench-c1"
    summary = json.loads((item / "summary.json").read_text())
    assert not (item / "sizing").exists()
    assert summary["num_requests"] == n and summary["sizing"]["source"] == "baseline"

    # four times faster: the entry's count is too short now, and the reason says what to do
    res = perf.path / "faster"
    run(perf, "--results-dir", str(res), *sel, "--setting", "speed=4.0")
    lines = (res / "verdicts.jsonl").read_text().splitlines()
    speed = [c for c in map(json.loads, lines) if c["metric"] == "output_throughput_tok_s"]
    assert f"its {n} requests are its baseline entry's" in speed[0]["reason"]
    assert (
        json.loads((res / "cal-native-mt-bench-c1" / "summary.json").read_text())["num_requests"]
        == n
    )


AFTER_PERF = """
import json, os
from pathlib import Path

import pytest


@pytest.mark.perf
def test_runs_after_the_perf_items():
    log = Path(os.environ["SPECPERF_TEST_RESULTS"]) / "engine-starts.jsonl"
    last = json.loads(log.read_text().splitlines()[-1])
    assert last["event"] == "stop", last
"""


def test_the_engine_stops_after_the_last_item_that_needs_it(perf, monkeypatch):
    res = perf.path / "r1"
    monkeypatch.setenv("SPECPERF_TEST_RESULTS", str(res))
    perf.makepyfile(test_zz_after=AFTER_PERF)
    r = run(perf, "--results-dir", str(res), "--update-baselines")
    r.assert_outcomes(passed=5)  # 4 perf items, then the test that sees no engine running
    rows = [json.loads(x) for x in (res / "engine-starts.jsonl").read_text().splitlines()]
    done = "no later item of this worker needs it"
    assert [(x["event"], x["method"], x.get("reason")) for x in rows] == [
        ("start", "native", None),
        ("stop", "native", done),
        ("start", "eagle3", None),
        ("stop", "eagle3", done),
    ]

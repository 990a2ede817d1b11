"""`specperf merge`: shards → one results set with the same verdicts as one unsharded run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from specperf import verdict
from specperf.baselines import load_baselines
from specperf.cli import main
from specperf.errors import ConfigError
from specperf.report.merge import merge

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures_results"
MAIN = FIXTURES / "run-main"
BASELINE = FIXTURES / "baseline-nvidia-l40sx1.json"
CROSS_RULE = "rule:vllm-vs-sglang-eagle3"


def shard(tmp: Path, name: str, items: list[str], extra: dict[str, str] | None = None) -> Path:
    """A shard as one worker/host would leave it: its items, the suite snapshot, its engine
    starts and whatever else it wrote."""
    d = tmp / name
    d.mkdir(parents=True)
    for item in items:
        shutil.copytree(MAIN / item, d / item)
    shutil.copy2(MAIN / "suite.json", d / "suite.json")
    (d / "engine-starts.jsonl").write_text(json.dumps({"worker": name, "pid": 1}) + "\n")
    for fname, text in (extra or {}).items():
        (d / fname).write_text(text)
    return d


def split(tmp: Path) -> list[Path]:
    """vLLM's items on two shards, SGLang's on a third: every cross-engine rule and half the
    speedup rules need items from two shards."""
    items = sorted(p.parent.name for p in MAIN.glob("*/summary.json"))
    vllm = [i for i in items if i.startswith("vllm-")]
    natives = [i for i in vllm if "-native-" in i]
    others = [i for i in vllm if "-native-" not in i]
    sglang = [i for i in items if i.startswith("sglang-")]
    return [
        shard(tmp, "gpu0", natives, {"benchmark.json": "{}"}),
        shard(tmp, "gpu1", others),
        shard(tmp, "host2", sglang),
    ]


def signature(checks: list[verdict.Check]) -> list[tuple]:
    return sorted(
        (c.key, c.metric, c.status, c.measured, c.baseline, c.delta, c.reason) for c in checks
    )


@pytest.fixture(scope="module")
def unsharded():
    return verdict.evaluate_results([MAIN], baselines=load_baselines(BASELINE))


def test_merged_shards_give_the_same_verdicts_as_one_unsharded_run(tmp_path, unsharded):
    res = merge(split(tmp_path), tmp_path / "merged", baseline=BASELINE)
    assert res.items == len(list(MAIN.glob("*/summary.json")))
    assert signature(res.verdict.checks) == signature(unsharded.checks)
    assert {c.status for c in unsharded.checks} >= {"fail", "xfail", "pass", "not_evaluated"}
    # what was written is that verdict, not the shards' own
    written = [
        verdict.Check.from_json(json.loads(x))
        for x in (tmp_path / "merged" / "verdicts.jsonl").read_text().splitlines()
    ]
    assert signature(written) == signature(unsharded.checks)
    counts = json.loads((tmp_path / "merged" / "verdict.json").read_text())["counts"]
    assert counts == unsharded.to_json()["counts"]


def test_a_shard_alone_cannot_evaluate_rules_that_span_shards(tmp_path, unsharded):
    shards = split(tmp_path)
    alone = verdict.evaluate_results([shards[1]], baselines=load_baselines(BASELINE))
    cross = [c for c in alone.checks if c.metric.startswith(CROSS_RULE)]
    assert cross and all(c.status == "not_evaluated" for c in cross)
    whole = [c for c in unsharded.checks if c.metric.startswith(CROSS_RULE)]
    assert {c.status for c in whole} & {"pass", "fail"}


def test_merge_keeps_everything_it_was_given(tmp_path):
    shards = split(tmp_path)
    out = tmp_path / "merged"
    merge(shards, out, baseline=BASELINE)
    starts = [json.loads(x) for x in (out / "engine-starts.jsonl").read_text().splitlines()]
    assert [s["source"] for s in starts] == ["gpu0", "gpu1", "host2"]
    assert (out / "shards" / "gpu0" / "benchmark.json").read_text() == "{}"
    snap = json.loads((out / "suite.json").read_text())
    assert snap["rules"] == json.loads((MAIN / "suite.json").read_text())["rules"]
    assert len(snap["merged_from"]) == 3
    manifest = json.loads((out / "merge.json").read_text())
    assert sum(manifest["items"].values()) == len(list(MAIN.glob("*/summary.json")))


def test_the_same_key_measured_twice_is_refused(tmp_path):
    a = shard(tmp_path, "a", ["vllm-native-mt-bench-c1"])
    b = shard(tmp_path, "b", ["vllm-native-mt-bench-c1"])
    s = json.loads((b / "vllm-native-mt-bench-c1" / "summary.json").read_text())
    s["output_throughput_tok_s"] *= 1.1
    (b / "vllm-native-mt-bench-c1" / "summary.json").write_text(json.dumps(s))
    with pytest.raises(ConfigError, match="also"):
        merge([a, b], tmp_path / "out")


def test_identical_copies_of_an_item_merge_once(tmp_path):
    a = shard(tmp_path, "a", ["vllm-native-mt-bench-c1", "vllm-native-mt-bench-c4"])
    b = shard(tmp_path, "b", ["vllm-native-mt-bench-c1"])
    assert merge([a, b], tmp_path / "out").items == 2


def test_shards_of_different_suite_settings_are_refused(tmp_path):
    a = shard(tmp_path, "a", ["vllm-native-mt-bench-c1"])
    b = shard(tmp_path, "b", ["vllm-native-mt-bench-c4"])
    snap = json.loads((b / "suite.json").read_text())
    snap["rules"] = snap["rules"][:1]
    (b / "suite.json").write_text(json.dumps(snap))
    with pytest.raises(ConfigError, match="'rules' differs"):
        merge([a, b], tmp_path / "out")


def test_output_must_be_new_or_empty(tmp_path):
    a = shard(tmp_path, "a", ["vllm-native-mt-bench-c1"])
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "x").write_text("")
    with pytest.raises(ConfigError, match="not empty"):
        merge([a], tmp_path / "out")


def test_merge_command_prints_the_verdict_and_gates_only_with_check(tmp_path, capsys):
    shards = split(tmp_path)
    args = [*map(str, shards), "--baseline", str(BASELINE)]
    rc = main(["merge", *args, "--out", str(tmp_path / "m")])
    out = capsys.readouterr()  # (--baseline given: the repo's baselines/ is never read)
    assert rc == 0  # merged; gating is `specperf verdict`'s job (the nightly job runs it next)
    assert "merged" in out.out and "qwen3-8b/vllm/eagle3/humaneval/c4/greedy" in out.out
    assert "FAIL" in out.err
    assert main(["merge", *args, "--out", str(tmp_path / "m2"), "--check"]) == 1
    one = [str(shards[0]), "--baseline", str(BASELINE), "--check"]
    assert main(["merge", *one, "--out", str(tmp_path / "m3")]) == 0


def test_merge_command_bad_input_is_one_line(tmp_path, capsys):
    rc = main(["merge", str(tmp_path / "nope"), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.count("\n") == 0 and "does not exist" in err


def test_merge_command_can_write_the_report(tmp_path, capsys):
    shards = split(tmp_path)
    none = str(tmp_path / "no-baselines")
    rc = main(
        [
            "merge",
            *map(str, shards[:2]),
            "--out",
            str(tmp_path / "m"),
            "--report",
            "--baselines-dir",
            none,
        ]
    )
    assert rc == 0
    html = tmp_path / "m" / "report" / "report.html"
    assert html.is_file() and f"report: {html}" in capsys.readouterr().out
    # no --baseline: the report shows the merged verdict the merge recorded
    assert "Verdicts recorded by the suite during the run" in html.read_text()

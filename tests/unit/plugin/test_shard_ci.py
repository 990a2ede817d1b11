"""The CI side of sharding: the matrix (one job per GPU host) and folding the shards'
refreshed baselines back into one directory."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from specperf.baselines import load_baselines
from specperf.errors import ConfigError
from specperf.shard import ci_matrix, merge_baseline_updates

BASELINE = Path(__file__).resolve().parents[2] / "fixtures_results" / "baseline-nvidia-l40sx1.json"


def test_matrix_same_labels_for_every_shard() -> None:
    m = ci_matrix(3, '["self-hosted", "l40"]')
    assert [e["shard"] for e in m] == ["1/3", "2/3", "3/3"]
    assert all(e["labels"] == ["self-hosted", "l40"] for e in m)
    assert ci_matrix(0, "")[0] == {
        "shard": "1/1",
        "index": 1,
        "total": 1,
        "labels": ["self-hosted", "linux", "gpu"],
    }
    assert ci_matrix(2, "self-hosted, gpu")[1]["labels"] == ["self-hosted", "gpu"]


def test_matrix_one_host_per_label_list() -> None:
    m = ci_matrix(0, [["self-hosted", "host-a"], ["self-hosted", "host-b"]])
    assert [(e["shard"], e["labels"][1]) for e in m] == [("1/2", "host-a"), ("2/2", "host-b")]
    with pytest.raises(ConfigError, match="2 label lists for 3 shards"):
        ci_matrix(3, [["a"], ["b"]])
    with pytest.raises(ConfigError, match="expected a JSON list"):
        ci_matrix(1, '{"a": 1}')
    with pytest.raises(ConfigError, match="list of strings or of label lists"):
        ci_matrix(1, '[["a"], "b"]')


def test_matrix_cli_prints_json_for_the_workflow() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "specperf.shard", "matrix", "--shards", "2", "--labels", '["g"]'],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert json.loads(out) == {"include": ci_matrix(2, ["g"])}
    bad = subprocess.run(
        [sys.executable, "-m", "specperf.shard", "matrix", "--shards", "0/2"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 2 and "--shards" in bad.stderr


def _shard_copy(root: Path, name: str, changes: dict[str, float]) -> Path:
    d = root / name
    d.mkdir(parents=True)
    data = json.loads(BASELINE.read_text())
    for key, value in changes.items():
        data["entries"][key]["metrics"]["output_throughput_tok_s"]["value"] = value
    (d / BASELINE.name).write_text(json.dumps(data))
    return d


def test_shards_refreshed_baselines_fold_into_one_file(tmp_path: Path) -> None:
    into = tmp_path / "baselines"
    into.mkdir()
    shutil.copy(BASELINE, into / BASELINE.name)
    keys = list(json.loads(BASELINE.read_text())["entries"])
    s1 = _shard_copy(tmp_path, "s1", {keys[0]: 111.0})
    s2 = _shard_copy(tmp_path, "s2", {keys[3]: 222.0, keys[4]: 333.0})
    applied = merge_baseline_updates(into, [s1, s2])
    assert applied == sorted(f"{BASELINE.name}: {k}" for k in (keys[0], keys[3], keys[4]))
    merged = load_baselines(into / BASELINE.name)
    tok = {k: e.metrics["output_throughput_tok_s"].value for k, e in merged.entries.items()}
    original = load_baselines(BASELINE)
    assert tok[keys[0]] == 111.0 and tok[keys[3]] == 222.0 and tok[keys[4]] == 333.0
    for k in set(keys) - {keys[0], keys[3], keys[4]}:  # untouched entries stay as they were
        assert merged.entries[k].to_json() == original.entries[k].to_json()


def test_two_shards_rewriting_one_entry_is_an_error(tmp_path: Path) -> None:
    into = tmp_path / "baselines"
    into.mkdir()
    shutil.copy(BASELINE, into / BASELINE.name)
    key = next(iter(json.loads(BASELINE.read_text())["entries"]))
    s1 = _shard_copy(tmp_path, "s1", {key: 1.0})
    s2 = _shard_copy(tmp_path, "s2", {key: 2.0})
    with pytest.raises(ConfigError, match="rewritten differently"):
        merge_baseline_updates(into, [s1, s2])
    assert (into / BASELINE.name).read_text() == BASELINE.read_text()  # untouched on error


def test_sharded_then_merged_gives_the_unsharded_verdict(tmp_path: Path) -> None:
    """Split a suite-written results set by `select_shard` as two hosts would, merge the shards
    with `specperf merge`: the verdict is the one of the unsharded run."""
    from specperf import verdict
    from specperf.cli import main
    from specperf.shard import select_shard

    run = BASELINE.parent / "run-main"
    items = sorted(p.parent for p in run.glob("*/summary.json"))

    def group(item: Path) -> tuple[str, str]:
        key = json.loads((item / "summary.json").read_text())["key"].split("/")
        return key[0], key[1]  # (model, engine)

    shards = []
    for i in (1, 2):
        d = tmp_path / f"shard-{i}"
        mine = select_shard(items, i, 2, key=group)
        assert mine, "both shards hold work"
        for item in mine:
            shutil.copytree(item, d / item.name)
        shutil.copy(run / "suite.json", d / "suite.json")
        shards.append(d)
    owners = [{group(p) for p in select_shard(items, i, 2, key=group)} for i in (1, 2)]
    assert not owners[0] & owners[1]
    out = tmp_path / "merged"
    assert main(["merge", *map(str, shards), "--out", str(out), "--baseline", str(BASELINE)]) == 0
    whole = verdict.evaluate_results([run], baselines=load_baselines(BASELINE))
    merged = verdict.evaluate_results([out], baselines=load_baselines(BASELINE))

    def lines(v: verdict.Verdict) -> list[str]:
        return sorted(c.line() for c in v.checks)

    assert lines(merged) == lines(whole)
    assert any(c.status == "fail" for c in merged.checks)  # the planted regression survives

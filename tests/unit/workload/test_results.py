"""Results on disk: atomic files, strict JSON, records kept on a crash."""

from __future__ import annotations

import json
import os
import stat

import pytest

from specperf.errors import ConfigError
from specperf.measure import measure
from specperf.results import (
    RequestLog,
    read_requests,
    read_summary,
    write_json_atomic,
    write_run,
)
from specperf.schemas import Dataset, PromptItem, RequestRecord, SamplingParams, WorkloadSpec
from tests.calibration.client import CalibrationClient
from tests.calibration.server import CalibrationConfig, CalibrationServer


def record(i, **kw):
    return RequestRecord(index=i, prompt_id=f"p{i}", category="c", **kw)


def test_write_run_and_read_back(tmp_path):
    recs = [record(0, text="héllo", token_ids=[1, 2]), record(1, error="HTTP 500: x")]
    write_run(tmp_path, {"completed": 1, "x": float("nan")}, recs)
    assert read_summary(tmp_path) == {"completed": 1, "x": None}  # NaN → null, strict JSON
    assert read_summary(tmp_path / "summary.json")["completed"] == 1
    back = read_requests(tmp_path)
    assert [r["index"] for r in back] == [0, 1]
    assert back[0]["text"] == "héllo" and back[0]["token_ids"] == [1, 2]
    assert back[1]["error"] == "HTTP 500: x"
    assert not list(tmp_path.glob(".*.tmp"))  # no temporary files left behind


def test_atomic_write_keeps_a_files_mode_and_gives_a_new_one_the_umasks(tmp_path):
    """mkstemp makes 0600 files: a baselines folder a team shares must stay readable."""
    old = os.umask(0o022)
    try:
        fresh = tmp_path / "new.json"
        write_json_atomic(fresh, {"a": 1})
        assert stat.S_IMODE(fresh.stat().st_mode) == 0o644
        shared = tmp_path / "shared.json"
        shared.write_text("{}")
        shared.chmod(0o664)
        write_json_atomic(shared, {"a": 2})
        assert stat.S_IMODE(shared.stat().st_mode) == 0o664
        assert json.loads(shared.read_text()) == {"a": 2}
    finally:
        os.umask(old)


def test_atomic_write_keeps_the_old_file_when_serialising_fails(tmp_path):
    path = tmp_path / "s.json"
    write_json_atomic(path, {"a": 1})
    with pytest.raises(TypeError):
        write_json_atomic(path, {"a": object()})
    assert json.loads(path.read_text()) == {"a": 1}
    assert not list(tmp_path.glob(".*.tmp"))


def test_request_log_is_readable_while_running(tmp_path):
    log = RequestLog(tmp_path / "requests.jsonl")
    log.append(record(0))
    assert [r["index"] for r in read_requests(tmp_path)] == [0]  # flushed per line
    log.append(record(1))
    log.close()
    assert len(read_requests(tmp_path)) == 2


def test_bad_summary_files_are_one_line_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        read_summary(tmp_path)
    (tmp_path / "summary.json").write_text("{oops")
    with pytest.raises(ConfigError, match=r"summary.json: not valid JSON"):
        read_summary(tmp_path)
    (tmp_path / "summary.json").write_text("[1]")
    with pytest.raises(ConfigError, match="JSON object"):
        read_summary(tmp_path)
    (tmp_path / "requests.jsonl").write_text('{"index": 0}\nnope\n')
    with pytest.raises(ConfigError, match=r"requests.jsonl:2"):
        read_requests(tmp_path)


def test_a_crash_mid_run_keeps_the_measured_requests(tmp_path, monkeypatch):
    monkeypatch.setattr("specperf.workload.COUNTER_SETTLE_INTERVAL_S", 0.05)
    items = tuple(PromptItem(id=f"q{i}", category="c", turns=(f"q {i}",)) for i in range(10))
    ds = Dataset(name="toy", version="v", items=items)

    def crash(done, total):
        if done == 3:
            raise RuntimeError("boom")

    cfg = CalibrationConfig(ttft_s=0.002, step_interval_s=0.002, output_tokens=5)
    with CalibrationServer(cfg) as srv, pytest.raises(RuntimeError, match="boom"):
        measure(
            CalibrationClient(srv.url),
            ds,
            SamplingParams(),
            WorkloadSpec(num_requests=10),
            tmp_path,
            run_info={},
            progress=crash,
        )
    kept = read_requests(tmp_path)
    assert len(kept) == 3 and all(r["error"] is None for r in kept)
    assert not (tmp_path / "summary.json").exists()


def test_measure_writes_summary_and_records_in_send_order(tmp_path, monkeypatch):
    monkeypatch.setattr("specperf.workload.COUNTER_SETTLE_INTERVAL_S", 0.05)
    items = tuple(PromptItem(id=f"q{i}", category="c", turns=(f"q {i}",)) for i in range(6))
    ds = Dataset(name="toy", version="abc", items=items, tier="smoke")
    cfg = CalibrationConfig(
        ttft_s=0.002,
        step_interval_s=0.002,
        output_tokens=5,
        num_speculative_tokens=2,
        accept_pattern=[1],
    )
    with CalibrationServer(cfg) as srv:
        client = CalibrationClient(srv.url)
        s = measure(
            client,
            ds,
            SamplingParams(),
            WorkloadSpec(concurrency=2, num_requests=6),
            tmp_path,
            run_info={"method": "ngram", "topology": {"k": 2}},
            environment={"cpu": "x"},
        )
    assert read_summary(tmp_path) == json.loads(json.dumps(s))
    assert s["dataset"] == "toy" and s["dataset_version"] == "abc" and s["tier"] == "smoke"
    assert s["engine"] == "calibration" and s["engine_version"] == "0.0.0+calibration"
    env = s["environment"]  # what was given, plus placement, load and transport
    assert env["cpu"] == "x" and s["topology"] == {"k": 2}
    assert set(env) == {"cpu", "placement", "load", "http_transport"}
    assert env["placement"]["engine"] is None and env["placement"]["client"]["pinned"] is False
    assert s["mean_acceptance_length"] == 2.0
    sent = [r["sent_s"] for r in read_requests(tmp_path)]
    assert sent == sorted(sent) and len(sent) == 6

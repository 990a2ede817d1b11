"""The report's item section says which items were delivery-bound, with the reason."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from specperf.report.build import build_report

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures_results" / "run-main"
ITEMS = ("vllm-native-mt-bench-c1", "vllm-native-mt-bench-c4")
REASON = "16 of 16 requests received their chunks in bursts (gaps < 0.2 ms)"


def test_details_name_delivery_bound_items_with_their_reason(tmp_path: Path):
    src = tmp_path / "run"
    for item in ITEMS:
        shutil.copytree(FIXTURES / item, src / item)
    f = src / ITEMS[1] / "summary.json"
    s = json.loads(f.read_text())
    s["delivery"] = {"bound": True, "reason": REASON, "burst_request_share": 1.0}
    f.write_text(json.dumps(s))
    g = src / ITEMS[0] / "summary.json"
    s0 = json.loads(g.read_text())
    s0["delivery"] = {"bound": False, "reason": "0 of 8 requests", "burst_request_share": 0.0}
    g.write_text(json.dumps(s0))
    md = build_report([src], out=tmp_path / "out").markdown.read_text()
    details = md.split("Details per dataset", 1)[1]
    assert "Delivery-bound items" in details
    assert f"{ITEMS[1]} ({REASON})" in details
    assert f"{ITEMS[0]} (" not in details.split("Delivery-bound items", 1)[1].split("\n")[0]

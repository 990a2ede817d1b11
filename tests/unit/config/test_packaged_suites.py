"""Every packaged suite expands into items whose engine command lines build.

Catches a suite whose topology an engine refuses (e.g. num_draft_tokens that disagrees with K)
before a GPU night is spent finding out. Pure command building: nothing is started."""

from __future__ import annotations

import inspect
import sys

import pytest

from specperf.config import Filters, load_suite, packaged_suites
from specperf.engines import get_engine_class
from specperf.engines.base import Devices


def _build(spec, port: int = 8000) -> list[str]:
    mod = sys.modules[get_engine_class(spec.kind).__module__]
    params = inspect.signature(mod.build_command).parameters
    kwargs = {"devices": Devices()} if "devices" in params else {}
    return mod.build_command(spec, port, **kwargs)


@pytest.mark.parametrize("suite_name", sorted(packaged_suites()))
def test_every_item_of_a_packaged_suite_builds_its_engine_command(suite_name: str) -> None:
    suite = load_suite(suite_name, {})
    items = suite.items(Filters(), tier=None)
    assert items, f"{suite_name} expands to no items"
    built = 0
    for spec in {it.spec for it in items}:
        if spec.kind == "calibration":
            continue
        cmd = _build(spec)
        assert cmd and all(isinstance(a, str) for a in cmd), spec
        built += 1
    assert built > 0

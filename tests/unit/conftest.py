"""Fixtures shared by unit-test modules."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Tiny tensors: torch's thread pool only adds wake-up latency (ms per op on a busy box).
    Modules that run torch opt in with ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def gpu_run() -> ModuleType:
    """The GPU night (``specperf gpu-night``, specperf.testkit.gpu_night): its model
    builder, head swap, start annotation and report code are tested without a GPU. The package
    with every module of it imported (``cli`` imports the others): tests reach them by name."""
    import importlib

    importlib.import_module("specperf.testkit.gpu_night.cli")
    return importlib.import_module("specperf.testkit.gpu_night")

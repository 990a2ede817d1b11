"""Fixtures shared by unit-test modules."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Tiny tensors: torch's thread pool only adds wake-up latency (ms per op on a busy box).
    Modules that run torch opt in with ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)

"""Repository-level pytest setup. The specperf plugin itself loads through its pytest11 entry
point; this file only adds what lives under tests/: the calibration engine kind, so suites in
this repository (and pytester runs started from it) can use ``kind = "calibration"``."""

from __future__ import annotations

from tests.calibration.engine import register_calibration

register_calibration()

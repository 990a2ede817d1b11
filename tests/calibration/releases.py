"""The calibration engine as a series of releases, for the release matrix and bisect tests.

Kind ``calibration-releases``. The release is the engine's ``SPECPERF_RELEASE`` environment
value (a suite sets it from the setting the watch switches: ``env = { SPECPERF_RELEASE =
"${calib_version}" }``) and is reported as the engine's version. Option ``release_steps`` plants
changes: a JSON object ``{"1.3": {"accept_pattern": "1,1,1"}, "1.5": {"speed": 0.9}}`` applies
each release's option overrides from that release on (PEP 440 order, later steps on top of
earlier ones); ``speed`` multiplies the engine's own speed. Any other option is the calibration
engine's (tests.calibration.engine).

``upstream_compare`` answers a fake repository's compare link, as an engine module does for the
real engines (specperf.engines.vllm.releases).

Loaded into the suite's pytest runs with ``-p tests.calibration.releases`` (it registers the
kind on import).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from packaging.version import Version

from specperf.engines import register
from specperf.engines.base import Devices, EngineSpec
from tests.calibration.engine import CalibrationEngine

KIND = "calibration-releases"
COMPARE_URL = "https://example.invalid/calibration/compare/{old}...{new}"


def options_for(release: str, base: dict[str, Any], steps: dict[str, dict[str, Any]]) -> dict:
    """The engine options of ``release``: ``base`` with every step at or below it applied."""
    opts = dict(base)
    for start in sorted(steps, key=Version):
        if Version(release) < Version(start):
            continue
        for k, v in steps[start].items():
            opts[k] = float(opts.get(k, 1.0)) * float(v) if k == "speed" else v
    return opts


class ReleasesCalibrationEngine(CalibrationEngine):
    """The calibration engine whose behaviour depends on its release (see the module doc)."""

    kind = KIND

    def __init__(self, spec: EngineSpec, devices: Devices, log_dir: Path) -> None:
        opts = dict(spec.options)
        steps = json.loads(str(opts.pop("release_steps", "{}")))
        release = dict(spec.env)["SPECPERF_RELEASE"]
        opts = options_for(release, opts, steps)
        opts["version"] = release
        spec = dataclasses.replace(spec, options=tuple(sorted(opts.items())))
        super().__init__(spec, devices, log_dir)

    @staticmethod
    def upstream_compare(package: str, old: str, new: str) -> str | None:
        return COMPARE_URL.format(old=old, new=new)


register(KIND, f"{__name__}:ReleasesCalibrationEngine")

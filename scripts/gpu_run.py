#!/usr/bin/env python3
"""``specperf gpu-night`` under its old name; scripts importing ``gpu_run`` get its functions."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from specperf.testkit.gpu_night import *  # noqa: F403
from specperf.testkit.gpu_night import main

if __name__ == "__main__":
    raise SystemExit(main())

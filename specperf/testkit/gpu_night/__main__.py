"""``python -m specperf.testkit.gpu_night``: ``specperf gpu-night`` without specperf installed."""

from specperf.testkit.gpu_night.cli import main

raise SystemExit(main())

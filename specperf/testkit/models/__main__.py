"""``python -m specperf.testkit.models build|path``: ``specperf model`` without the CLI."""

from __future__ import annotations

from specperf.testkit.models.cli import main

if __name__ == "__main__":
    raise SystemExit(main())

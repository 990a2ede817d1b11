"""``python -m specperf.testkit.eagle3_fit``: the head fit's command line (``cli.main``)."""

from __future__ import annotations

from specperf.testkit.eagle3_fit.cli import main

if __name__ == "__main__":
    raise SystemExit(main())

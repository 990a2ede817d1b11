"""Old home of the EAGLE3 head fit, kept so that ``from specperf.eagle3.fit import ...`` and
``python -m specperf.eagle3.fit ...`` keep working. The code is in
``specperf.testkit.eagle3_fit`` (tooling, not the product): import from there, and patch the
module that uses a name."""

from __future__ import annotations

from specperf.testkit.eagle3_fit import *  # noqa: F403
from specperf.testkit.eagle3_fit import __all__ as _all

__all__ = list(_all)

if __name__ == "__main__":
    from specperf.testkit.eagle3_fit.cli import main

    raise SystemExit(main())

"""Old home of the tiny test models, kept so that ``from specperf.testmodels import ...`` and
``python -m specperf.testmodels build`` keep working. The code is in ``specperf.testkit.models``
(tooling, not the product): import from there, and patch the module that uses a name."""

from __future__ import annotations

from specperf.testkit.models import *  # noqa: F403
from specperf.testkit.models import __all__ as _all
from specperf.testkit.models.qwen3 import _build_into, _dflash_digest, _mtp_digest  # noqa: F401

__all__ = list(_all)

if __name__ == "__main__":
    from specperf.testkit.models.qwen3 import main

    raise SystemExit(main())

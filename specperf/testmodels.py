"""Old home of the tiny test models, kept so that ``from specperf.testmodels import ...`` and
``python -m specperf.testmodels build`` keep working. The code is in ``specperf.testkit.models``
(tooling, not the product): import from there, and patch the module that uses a name."""

from __future__ import annotations

from specperf.testkit.models import *  # noqa: F403
from specperf.testkit.models import __all__ as _all
from specperf.testkit.models.cache import _build_into  # noqa: F401
from specperf.testkit.models.corpus import _corpus  # noqa: F401
from specperf.testkit.models.dflash import _dflash_digest  # noqa: F401
from specperf.testkit.models.mtp import _mtp_digest  # noqa: F401

__all__ = list(_all)

if __name__ == "__main__":
    from specperf.testkit.models.cli import main

    raise SystemExit(main())

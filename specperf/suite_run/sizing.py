"""An item measured again at the count its too-short first start asked for
(``specperf.workload.sizing`` decides the count; this moves the files)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from specperf import verdict as vd
from specperf.config import Item
from specperf.workload import sizing


def with_requests(item: Item, n: int) -> Item:
    """``item`` measured with ``n`` requests (its id and key stay: they name no count)."""
    return dataclasses.replace(item, workload=dataclasses.replace(item.workload, num_requests=n))


def keep_sizing_start(item_dir: Path) -> None:
    """Move the too-short first start out of the item's directory into ``sizing/`` (its summary
    renamed, so no results loader takes it for an item): nothing measured is lost."""
    aside = item_dir.with_name(item_dir.name + ".sizing")
    os.replace(item_dir, aside)
    item_dir.mkdir()
    os.replace(aside, item_dir / sizing.SIZING_DIR)
    kept = item_dir / sizing.SIZING_DIR / vd.SUMMARY
    if kept.exists():
        os.replace(kept, kept.with_name(sizing.SIZING_SUMMARY))

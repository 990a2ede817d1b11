"""Per-hardware baseline files: keys, fingerprints, per-start values, and update with merge.

One JSON file per hardware profile (``baselines/<profile>.json``; a suite may name a folder of
its own, ``baselines/<folder>/<profile>.json``). Every metric a machine can move — speed, latency,
acceptance, output length — is therefore compared only with figures of the same profile, and
profiles never overwrite each other. Entries are keyed
``model/engine/method/dataset/c<N>/sampling``; each metric is ``{"value", "direction",
"tolerance", "starts": [{"value", "host", "date", "engine_version", "boot_id", "cpu"}, ...]}``
— one value per ENGINE START, the unit the verdict statistics use (specperf.verdict.decision) —
and each entry carries provenance and the fingerprint of everything that makes two runs
comparable. The format is documented in docs/baselines.md.

The package follows the job: ``entries`` (the records and the fingerprint), ``passes`` (which
starts are independent: windows and passes), ``update`` (an entry from a run's figures, appended
to the previous one), ``files`` (reading, validating, locked atomic updates). Every name below
stays importable from ``specperf.baselines``.
"""

from __future__ import annotations

from specperf.baseline_schema import SCHEMA, SOURCES, TOLERANCE_SOURCES
from specperf.baselines.entries import (
    BaselineEntry,
    BaselineFile,
    BaselineMetric,
    fingerprint_diff,
    fingerprint_digest,
)
from specperf.baselines.files import (
    baseline_path,
    dump,
    load_baselines,
    lock_for,
    parse_baselines,
    update_baselines,
    write_atomic,
)
from specperf.baselines.passes import (
    INDEPENDENT_AFTER_H,
    independent_windows,
    pass_label,
    pass_labels,
    start_time,
)
from specperf.baselines.update import (
    KEEP_PASSES,
    KEEP_STARTS,
    MAL_FLOOR,
    MAL_METRIC,
    MIN_REPEATS_FOR_TOLERANCE,
    cannot_fail,
    make_entry,
    measured_tolerance,
)

__all__ = [
    "INDEPENDENT_AFTER_H",
    "KEEP_PASSES",
    "KEEP_STARTS",
    "MAL_FLOOR",
    "MAL_METRIC",
    "MIN_REPEATS_FOR_TOLERANCE",
    "SCHEMA",
    "SOURCES",
    "TOLERANCE_SOURCES",
    "BaselineEntry",
    "BaselineFile",
    "BaselineMetric",
    "baseline_path",
    "cannot_fail",
    "dump",
    "fingerprint_diff",
    "fingerprint_digest",
    "independent_windows",
    "load_baselines",
    "lock_for",
    "make_entry",
    "measured_tolerance",
    "parse_baselines",
    "pass_label",
    "pass_labels",
    "start_time",
    "update_baselines",
    "write_atomic",
]

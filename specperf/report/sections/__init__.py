"""The report as a list of sections (tables + charts + notes), independent of the output
format: :mod:`markdown` and :mod:`html` render the same list.

Every section of the issue is always present; a section without data says why instead of
vanishing, so a reader can tell "not measured" from "forgotten".

``parts`` holds the section model; the sections themselves are grouped by what they answer:
``speed`` (how fast, against native), ``context`` (on what: engines, environment, details),
``correctness`` (quality guards) and ``reference`` (comparisons with a baseline or a run).
"""

from __future__ import annotations

from specperf.report.sections.context import details, engines, environment
from specperf.report.sections.correctness import GUARD_ORDER, guard_rows, quality
from specperf.report.sections.parts import NO_PAIR, NO_SPEC, Chart, Part, Section, Table, Text
from specperf.report.sections.reference import comparison, no_comparison
from specperf.report.sections.speed import (
    acceptance,
    concurrency,
    overview,
    positions,
    sensitivity,
    speedup,
)

__all__ = [
    "GUARD_ORDER",
    "NO_PAIR",
    "NO_SPEC",
    "Chart",
    "Part",
    "Section",
    "Table",
    "Text",
    "acceptance",
    "comparison",
    "concurrency",
    "details",
    "engines",
    "environment",
    "guard_rows",
    "no_comparison",
    "overview",
    "positions",
    "quality",
    "sensitivity",
    "speedup",
]

"""Nightly history and the drift check: catch several small regressions in a row.

The baseline gate compares one night with one stored figure and a tolerance wide enough for
noise, so a release that costs 3% and the next one another 3% can both pass. The history keeps
every night's run summaries and compares tonight with the last N nights of the same series
(hardware profile + item key + metric, same fingerprint where the summary carries one).

Drift rule (per series, direction and tolerance from the suite's metric policies):
  reference = median of the older half of the last N stored nights;
  flagged when the last ``persist`` points (the latest stored nights and tonight, default 2) are
  ALL worse than the reference by the tolerance or more. One bad night alone is the baseline
  gate's business; a new, lower level that persists — however it was reached — is drift.
  Fewer than ``min_history`` stored points: "insufficient history", never a pass.
"Worse by the tolerance or more" is the verdict module's ``compare``, the same test as the
baseline gate. Metrics whose policy gates ("always"/"measured") fail the check; report-only
metrics (gate "never", e.g. TTFT/TPOT) are listed as warnings. For "measured" metrics (noisy
CPU throughput) the tolerance is max(suite tolerance, t(0.995, n-1) x sqrt(1 + 1/n) x CV) over
the n nights before the recent ones — the half-width of a 99 % prediction interval for one new
night (``baselines.measured_tolerance``).

Store layout (a plain directory; in CI a worktree of the results branch, see docs/nightly.md):
``<store>/nights/<YYYY-MM-DDTHHMMSSZ>[-<run id>]/night.json`` (date, run id, commit, engine
versions, verdict counts) and ``summaries.jsonl`` (one run summary per line; requests are not
kept). Nights are written atomically; ``--keep`` prunes the oldest.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from specperf.config import MetricPolicy
from specperf.errors import ConfigError
from specperf.history.drift import (
    DEFAULT_LAST,
    DEFAULT_MIN_HISTORY,
    DEFAULT_PERSIST,
    DriftReport,
    Finding,
    Point,
    drift_check,
    fingerprint_of,
    metric_value,
    series_id,
    worse_by,
)
from specperf.history.store import (
    NIGHT_FILE,
    NIGHTS,
    SCHEMA,
    SUMMARIES_FILE,
    Night,
    add_night,
    load_nights,
    night_id,
    prune,
    read_summaries,
)
from specperf.results import write_json_atomic


# --------------------------------------------------------------------------- CLI
def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="history_cmd", required=True)
    a = sub.add_parser("add", help="store tonight's results as one night")
    a.add_argument("results", nargs="+", type=Path, help="results directories (shards)")
    a.add_argument("--store", type=Path, required=True, help="history directory")
    a.add_argument("--run-id", help="CI run id (part of the night id)")
    a.add_argument("--commit", help="suite repository commit")
    a.add_argument("--date", help="ISO date-time of the night (default: now, UTC)")
    a.add_argument("--keep", type=int, help="keep only the newest N nights")

    c = sub.add_parser("check", help="drift of tonight's results against the last N nights")
    c.add_argument("results", nargs="+", type=Path, help="tonight's results directories")
    c.add_argument("--store", type=Path, required=True, help="history directory")
    c.add_argument("--last", type=int, default=DEFAULT_LAST, help="nights compared (default 7)")
    c.add_argument(
        "--min-history",
        type=int,
        default=DEFAULT_MIN_HISTORY,
        help="stored points needed to judge a series (default 3)",
    )
    c.add_argument(
        "--persist",
        type=int,
        default=DEFAULT_PERSIST,
        help="latest points (tonight included) that must all be worse (default 2)",
    )
    c.add_argument(
        "--tolerance",
        type=float,
        help="one relative tolerance for every metric (default: the suite's)",
    )
    c.add_argument("--suite", help="suite whose metric policies apply (default: built-in)")
    c.add_argument("--json", type=Path, dest="json_out", help="write the findings as JSON")
    c.add_argument("--markdown", type=Path, help="write the findings as markdown")

    ls = sub.add_parser("list", help="list stored nights")
    ls.add_argument("--store", type=Path, required=True, help="history directory")


def _parse_date(text: str | None) -> _dt.datetime | None:
    if not text:
        return None
    try:
        d = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"--date {text!r}: expected an ISO date-time") from None
    return d if d.tzinfo else d.replace(tzinfo=_dt.timezone.utc)


def _policies(suite: str | None, results: Sequence[Path]) -> Mapping[str, MetricPolicy]:
    """The suite's metric policies: from --suite, else the snapshot the plugin wrote."""
    from specperf import verdict

    if suite:
        from specperf.config import load_suite

        return load_suite(suite).metrics
    return verdict.policies_from_snapshot(verdict.read_suite_snapshot(results))


def run(args: argparse.Namespace) -> int:
    if args.history_cmd == "add":
        night = add_night(
            args.store,
            args.results,
            date=_parse_date(args.date),
            run_id=args.run_id,
            commit=args.commit,
            keep=args.keep,
        )
        print(f"stored night {night.id} ({night.meta['items']} items) in {night.path}")
        return 0
    if args.history_cmd == "list":
        for n in load_nights(args.store):
            versions = " ".join(n.meta.get("engine_versions", []))
            print(f"{n.id}  items={n.meta.get('items')}  {versions}")
        return 0
    report = drift_check(
        read_summaries(args.results),
        load_nights(args.store),
        policies=_policies(args.suite, args.results),
        last=args.last,
        min_history=args.min_history,
        persist=args.persist,
        tolerance=args.tolerance,
    )
    md = report.to_markdown()
    print(md, end="")
    if args.json_out:
        write_json_atomic(args.json_out, report.to_json())
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(md, encoding="utf-8")
    step = os.environ.get("GITHUB_STEP_SUMMARY")
    if step:
        with open(step, "a", encoding="utf-8") as fh:
            fh.write(md)
    if report.failed:
        print(f"specperf history: {len(report.drifts)} series drifted", file=sys.stderr)
        return 1
    return 0


__all__ = [
    "DEFAULT_LAST",
    "DEFAULT_MIN_HISTORY",
    "DEFAULT_PERSIST",
    "NIGHTS",
    "NIGHT_FILE",
    "SCHEMA",
    "SUMMARIES_FILE",
    "DriftReport",
    "Finding",
    "Night",
    "Point",
    "add_night",
    "drift_check",
    "fingerprint_of",
    "load_nights",
    "metric_value",
    "night_id",
    "prune",
    "read_summaries",
    "series_id",
    "worse_by",
]

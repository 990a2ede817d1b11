"""Known issues: a failure an active quarantine covers becomes an expected failure (xfail); an
expired one stays a failure and says why."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable

from specperf.config import ItemKey, KnownIssue
from specperf.verdict.checks import Check, join


def issue_active(
    issue: KnownIssue, engine_version: str | None, today: _dt.date | None = None
) -> tuple[bool, str]:
    """(active, why). Expires on ``until_date`` or once the engine version reaches
    ``until_engine_version``; an unknown engine version keeps a version-bound issue active."""
    today = today or _dt.date.today()
    if issue.until_date:
        try:
            until = _dt.date.fromisoformat(issue.until_date)
        except ValueError:
            return False, f"quarantine has a bad until_date {issue.until_date!r}"
        if today >= until:
            return False, f"quarantine expired on {issue.until_date}"
    if issue.until_engine_version and engine_version:
        from packaging.version import InvalidVersion, Version

        try:
            if Version(engine_version) >= Version(issue.until_engine_version):
                return False, (
                    f"quarantine expired: engine {engine_version} >= {issue.until_engine_version}"
                )
        except InvalidVersion:
            pass
    return True, f"known issue: {issue.reason} ({issue.link})"


def quarantine(
    check: Check,
    issues: Iterable[KnownIssue],
    key: ItemKey | None,
    today: _dt.date | None,
) -> Check:
    """Turn a failure covered by an active known issue into an expected failure; an expired one
    stays a failure and says so."""
    if check.status != "fail":
        return check
    notes = []
    for issue in issues:
        if key is not None and issue.match and not key.matches(issue.match):
            continue
        if issue.metrics and check.metric not in issue.metrics and check.rule not in issue.metrics:
            continue
        active, why = issue_active(issue, check.engine_version, today)
        if active:
            check.status = "xfail"
            check.reason = join(check.reason, why)
            return check
        notes.append(why)
    if notes:
        check.reason = join(check.reason, "; ".join(notes))
    return check

"""Numbers as short plain text: the one home of the formatting that the verdict lines, the
terminal table and ``specperf bench`` share (the HTML/markdown report formats by column in
specperf.report.fmt)."""

from __future__ import annotations

from typing import Any


def number(x: float | None, missing: str = "n/a") -> str:
    """A figure as a person reads it in a verdict line: whole numbers without decimals, four
    significant digits below 10, one decimal up to 1e5, else three significant digits."""
    if x is None:
        return missing
    if float(x).is_integer() and abs(x) < 1e6:
        return str(int(x))
    if x == 0 or 0.01 <= abs(x) < 1e5:
        return f"{x:.4g}" if abs(x) < 10 else f"{x:.1f}"
    return f"{x:.3g}"


def fixed(v: Any, digits: int = 2, missing: str = "-") -> str:
    """A float with ``digits`` decimals (anything else as ``str``): columns of one kind of
    figure line up in ``specperf bench``'s table."""
    if v is None:
        return missing
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def percent_change(x: float, either_way: bool = False) -> str:
    """A signed relative change as a percentage: whole percents from 10 % up, one decimal below
    (a count gated at tolerance 0 sees -0.5 %, which "-0%" would hide); ``either_way``: a size
    in both directions ("±2%", a check of direction "equal")."""
    text = f"{x:+.0%}" if abs(x) >= 0.1 else f"{x:+.1%}"
    return "±" + text[1:] if either_way else text


__all__ = ["fixed", "number", "percent_change"]

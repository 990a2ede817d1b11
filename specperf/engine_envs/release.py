"""What a release says it needs, read from the release itself through pip's own resolver.

``pip install --dry-run --ignore-installed --no-deps --report OUT DIST==VERSION`` picks the wheel
this interpreter would install (tags, Requires-Python, yanked state: pip's rules, not ours) and
writes its METADATA without installing anything (a few seconds: metadata only). ``Release`` keeps
the fields a recipe reads: Requires-Dist, Requires-Python, the wheel's URL, and the marker
environment of the interpreter pip ran under, against which every requirement's environment
marker is evaluated with ``packaging.markers`` (never by string matching).

The marker of a finished env stores its ``Release``, so the recipe can be derived again offline
(``specperf env create`` on a ready env, ``specperf env python``) without the network.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from specperf.engine_envs.pipfail import EnvInstallError, classify

_YANK_RE = re.compile(r"Reason for being yanked:\s*(.*)")


@dataclass(frozen=True)
class Release:
    """One release's install facts (from pip's report, or stored in an env's marker)."""

    dist: str
    version: str
    requires_dist: tuple[str, ...] = ()
    requires_python: str | None = None
    url: str | None = None
    # marker environment of the interpreter pip ran under (python_full_version, platform_machine…)
    environment: dict[str, str] = field(default_factory=dict)
    yanked: str | None = None  # pip's "Reason for being yanked", when it warned

    @classmethod
    def from_report(cls, report: dict[str, Any], yanked: str | None = None) -> Release:
        """From ``pip install --report`` JSON (its first ``install`` entry)."""
        try:
            item = report["install"][0]
            meta = item["metadata"]
        except (KeyError, IndexError, TypeError):
            raise ValueError("pip's report has no install entry") from None
        return cls(
            dist=str(meta["name"]).lower().replace("_", "-"),
            version=str(meta["version"]),
            requires_dist=tuple(meta.get("requires_dist") or ()),
            requires_python=meta.get("requires_python") or None,
            url=(item.get("download_info") or {}).get("url"),
            environment=dict(report.get("environment") or {}),
            yanked=yanked,
        )

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "requires_dist": list(self.requires_dist)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Release:
        return cls(
            dist=str(data["dist"]),
            version=str(data["version"]),
            requires_dist=tuple(data.get("requires_dist") or ()),
            requires_python=data.get("requires_python"),
            url=data.get("url"),
            environment=dict(data.get("environment") or {}),
            yanked=data.get("yanked"),
        )

    @property
    def python_version(self) -> str:
        return self.environment.get("python_full_version") or self.environment.get(
            "python_version", "?"
        )

    @property
    def platform(self) -> str:
        env = self.environment
        return f"{env.get('sys_platform', '?')} {env.get('platform_machine', '?')}"

    def python_ok(self) -> str | None:
        """None when Requires-Python admits the interpreter; else the one-line cause."""
        if not self.requires_python:
            return None
        try:
            ok = Version(self.python_version) in SpecifierSet(self.requires_python)
        except (InvalidSpecifier, InvalidVersion):
            return None  # unreadable: let pip judge
        if ok:
            return None
        return f"Requires-Python {self.requires_python} excludes this Python {self.python_version}"

    def requirements(self, extras: Iterable[str] = ()) -> list[Requirement]:
        """Requires-Dist lines that apply here (markers evaluated for this interpreter and
        platform, with ``extras`` requested); unparsable lines are skipped."""
        wanted = ("", *extras)
        out = []
        for line in self.requires_dist:
            try:
                req = Requirement(line)
            except InvalidRequirement:
                continue
            if req.marker is None or any(
                req.marker.evaluate({**self.environment, "extra": e}) for e in wanted
            ):
                out.append(req)
        return out

    def pin(self, name: str, extras: Iterable[str] = ()) -> str | None:
        """The exact version (``==X``) this release pins ``name`` to here, None when it does not
        pin it exactly (absent, a range, or its marker excludes this machine)."""
        key = _canon(name)
        for req in self.requirements(extras):
            if _canon(req.name) != key:
                continue
            for spec in req.specifier:
                if spec.operator in ("==", "===") and "*" not in spec.version:
                    return spec.version
        return None


def _canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pip_env() -> dict[str, str]:
    return {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONUNBUFFERED": "1"}


def _dry_run(
    python: str, requirement: str, log_path: Path | None, timeout_s: float
) -> tuple[int, str, dict[str, Any] | None]:
    """One ``pip install --dry-run --no-deps --report`` of ``requirement``: (rc, output, report)."""
    with tempfile.TemporaryDirectory(prefix="specperf-pip-report-") as tmp:
        out = Path(tmp) / "report.json"
        cmd = [
            python, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-deps",
            "--quiet", "--report", str(out), requirement,
        ]  # fmt: skip
        try:
            proc = subprocess.run(
                cmd, capture_output=True, text=True, timeout=timeout_s, env=pip_env()
            )
            rc, text = proc.returncode, proc.stdout + proc.stderr
        except subprocess.TimeoutExpired:
            rc, text = 124, f"pip did not answer within {timeout_s:.0f}s\n"
        if log_path is not None:
            with open(log_path, "a") as log:
                log.write(f"\n$ {' '.join(cmd)}\n{_quiet(text)}(exit {rc})\n")
        report = None
        if rc == 0 and out.exists():
            try:
                report = json.loads(out.read_text())
            except ValueError:
                report = None
        return rc, text, report


def _quiet(text: str) -> str:
    """pip's output without the flood of 'Location ... is ignored' warnings of local indexes."""
    lines = [ln for ln in text.splitlines(keepends=True) if "is ignored: it is neither" not in ln]
    return "".join(lines)


def fetch(
    requirement: str, python: str, log_path: Path | None = None, timeout_s: float = 300.0
) -> Release:
    """The release ``requirement`` (DIST==VERSION) as pip would install it with ``python``;
    EnvInstallError (one line: release and cause) when pip finds no installable wheel."""
    started = time.monotonic()
    rc, text, report = _dry_run(python, requirement, log_path, timeout_s)
    if rc != 0 or report is None:
        cause = classify(_quiet(text), rc, requirement)
        raise EnvInstallError(requirement, cause, log_path)
    m = _YANK_RE.search(text)
    release = Release.from_report(report, yanked=m.group(1).strip() if m else None)
    if log_path is not None:
        with open(log_path, "a") as log:
            log.write(
                f"# {requirement}: metadata from {release.url} in "
                f"{time.monotonic() - started:.1f}s\n"
            )
    return release


def available(
    requirement: str, python: str, log_path: Path | None = None, timeout_s: float = 300.0
) -> tuple[bool, str]:
    """Whether pip can find a distribution for ``requirement`` alone (no dependencies);
    (ok, pip's output)."""
    rc, text, report = _dry_run(python, requirement, log_path, timeout_s)
    return rc == 0 and report is not None, _quiet(text)

"""Which releases of an engine package exist, and which is newest: the package index's JSON
simple API (PEP 691) — versions as data — or a fixed table (``--versions-file``, tests,
air-gapped hosts). The release watch (specperf.release_watch) asks here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from packaging.version import InvalidVersion, Version

from specperf.errors import ConfigError, SpecperfError


class VersionSource(Protocol):
    """Where release numbers come from (injectable: tests pass a fixed list)."""

    def versions(self, package: str) -> list[str]: ...


SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"  # PEP 691's JSON form of the simple API


def index_url_from_pip(python: str = sys.executable) -> str:
    """The package index pip would ask: ``$PIP_INDEX_URL``, else pip's configured
    ``global.index-url``, else pip's own default — so the watch follows the same index (and
    mirror) settings as ``specperf env create``."""
    if os.environ.get("PIP_INDEX_URL"):
        return os.environ["PIP_INDEX_URL"]
    code = (
        "import subprocess, sys\n"
        "r = subprocess.run([sys.executable, '-m', 'pip', 'config', 'get', 'global.index-url'],"
        " capture_output=True, text=True)\n"
        "if r.returncode == 0 and r.stdout.strip():\n    print(r.stdout.strip())\n"
        "else:\n    from pip._internal.models.index import PyPI\n    print(PyPI.simple_url)\n"
    )
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    try:
        out = subprocess.run(
            [python, "-c", code], capture_output=True, text=True, timeout=60, env=env, check=True
        )
    except (OSError, subprocess.SubprocessError):
        raise SpecperfError(
            "cannot tell which package index pip uses: set PIP_INDEX_URL or pass --versions-file"
        ) from None
    return out.stdout.strip().splitlines()[-1]


def versions_from_simple_json(data: Any) -> list[str]:
    """Release versions in a PEP 691 project page: the versions of its files that are not
    yanked (what pip would install), else the page's ``versions`` list (PEP 700)."""
    from packaging.utils import (
        InvalidSdistFilename,
        InvalidWheelFilename,
        parse_sdist_filename,
        parse_wheel_filename,
    )

    if not isinstance(data, Mapping):
        return []
    found: dict[str, None] = {}
    for f in data.get("files") or []:
        if not isinstance(f, Mapping) or f.get("yanked") or not isinstance(f.get("filename"), str):
            continue
        name = f["filename"]
        try:
            if name.endswith(".whl"):
                found[str(parse_wheel_filename(name)[1])] = None
            else:
                found[str(parse_sdist_filename(name)[1])] = None
        except (InvalidSdistFilename, InvalidWheelFilename):
            continue
    if not found and isinstance(data.get("versions"), list):
        found = {str(v): None for v in data["versions"]}
    return list(found)


@dataclass
class IndexVersions:
    """Asks the package index's JSON simple API (PEP 691) for a project's releases: versions
    as data, no text of a tool's output to parse. ``index_url`` None: the index pip uses."""

    index_url: str | None = None
    timeout_s: float = 60.0
    accept: str = SIMPLE_JSON  # the media type asked for (a test asks for another)

    def versions(self, package: str) -> list[str]:
        import httpx
        from packaging.utils import canonicalize_name

        base = (self.index_url or index_url_from_pip()).rstrip("/")
        url = f"{base}/{canonicalize_name(package)}/"
        try:
            resp = httpx.get(
                url, headers={"Accept": self.accept}, timeout=self.timeout_s, follow_redirects=True
            )
        except httpx.HTTPError as exc:
            raise SpecperfError(f"{url}: no answer ({type(exc).__name__}: {exc})") from None
        if resp.status_code == 404:
            raise SpecperfError(f"{url}: the index has no project {package}")
        if not resp.is_success:
            raise SpecperfError(f"{url}: HTTP {resp.status_code}")
        if "json" not in resp.headers.get("content-type", ""):
            raise SpecperfError(
                f"{url}: the index answered {resp.headers.get('content-type') or 'no type'}, "
                f"not {self.accept} (it does not serve PEP 691 JSON; use --versions-file)"
            )
        try:
            found = versions_from_simple_json(resp.json())
        except ValueError:
            raise SpecperfError(f"{url}: not valid JSON") from None
        if not found:
            raise SpecperfError(f"{url}: no releases of {package} listed")
        return found


@dataclass
class StaticVersions:
    """A fixed ``{package: [versions]}`` table (tests, or a host without index access)."""

    table: Mapping[str, Sequence[str]]

    @classmethod
    def from_file(cls, path: Path | str) -> StaticVersions:
        p = Path(path)
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"--versions-file {p}: cannot read: {exc.strerror}") from None
        except json.JSONDecodeError as exc:
            raise ConfigError(f"--versions-file {p}: not valid JSON ({exc.msg})") from None
        ok = isinstance(data, dict) and all(
            isinstance(v, list) and all(isinstance(x, str) for x in v) for v in data.values()
        )
        if not ok:
            raise ConfigError(f'--versions-file {p}: expected {{"package": ["1.0", "1.1", ...]}}')
        return cls(data)

    def versions(self, package: str) -> list[str]:
        if package not in self.table:
            raise SpecperfError(
                f"no versions listed for {package} (known: {', '.join(self.table)})"
            )
        return list(self.table[package])


def newest(versions: Iterable[str], pre: bool = False) -> str | None:
    """The highest version (PEP 440 order); pre-releases and dev builds only with ``pre``."""
    best: tuple[Version, str] | None = None
    for text in versions:
        try:
            v = Version(text)
        except InvalidVersion:
            continue
        if (v.is_prerelease or v.is_devrelease) and not pre:
            continue
        if best is None or v > best[0]:
            best = (v, text)
    return best[1] if best else None


def is_newer(candidate: str, pinned: str) -> bool:
    try:
        return Version(candidate) > Version(pinned)
    except InvalidVersion:
        return candidate != pinned


__all__ = [
    "SIMPLE_JSON",
    "IndexVersions",
    "StaticVersions",
    "VersionSource",
    "index_url_from_pip",
    "is_newer",
    "newest",
    "versions_from_simple_json",
]

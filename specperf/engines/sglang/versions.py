"""Facts about SGLang releases, read from the release wheels (cited per constant): which
version runs a spec, and whether that version supports its method. Everything else in this
package asks here instead of comparing version numbers itself."""

from __future__ import annotations

import functools
import subprocess
import sys

from packaging.version import Version

from specperf.engines.base import NATIVE, EngineSpec
from specperf.engines.release_text import parse_version
from specperf.errors import ConfigError

KIND = "sglang"
LAUNCH_MODULE = "sglang.launch_server"
HTTP_TIMEOUT_S = 10.0
HEALTH_PATH = "/health_generate"  # runs one token on every version (sglang.md §1.4)

# specperf method -> SGLang --speculative-algorithm (NEXTN is SGLang's MTP, an alias of EAGLE)
ALGORITHMS: dict[str, str] = {
    "eagle": "EAGLE",
    "eagle3": "EAGLE3",
    "mtp": "NEXTN",
    "draft_model": "STANDALONE",
    "ngram": "NGRAM",
    "dflash": "DFLASH",
}
# First release whose parser / SpeculativeAlgorithm enum knows the algorithm, read from the
# wheels (srt/server_args.py choices, srt/speculative/spec_info.py): 0.5.1 has EAGLE, EAGLE3,
# NEXTN; 0.5.2 adds STANDALONE; 0.5.3 NGRAM; 0.5.10 has no DFLASH, 0.5.11 does. 0.4.10 (the
# oldest release the reference checked) has EAGLE, EAGLE3, NEXTN.
ALGORITHM_SINCE: dict[str, str] = {
    "EAGLE": "0.4.10",
    "EAGLE3": "0.4.10",
    "NEXTN": "0.4.10",
    "STANDALONE": "0.5.2",
    "NGRAM": "0.5.3",
    "DFLASH": "0.5.11",
}
OLDEST_KNOWN = Version("0.4.10")
# `sglang serve` (console script sglang.cli.main:main): absent in 0.5.3, present in 0.5.5
SERVE_CLI_SINCE = Version("0.5.5")
# sglang:spec_verify_calls_total (observability/metrics_collector.py): absent 0.5.12, present 0.5.13
VERIFY_COUNTER_SINCE = Version("0.5.13")
# OpenAI-API `return_spec_tokens_details` / sglext.spec_tokens_details (entrypoints/openai/
# protocol.py): absent in 0.5.16, present in 0.5.19; 0.5.17/0.5.18 not checked, so not used there
SPEC_DETAILS_SINCE = Version("0.5.19")


@functools.lru_cache(maxsize=16)
def installed_version(python: str) -> str | None:
    """The sglang version installed for ``python`` (metadata only: sglang is not imported)."""
    code = "import importlib.metadata as m; print(m.version('sglang'))"
    try:
        out = subprocess.run(
            [python, "-c", code], capture_output=True, text=True, timeout=60, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def spec_version(spec: EngineSpec) -> Version | None:
    """The SGLang version a spec runs: ``options.sglang_version``, else the env's installed
    package, else the image tag (``lmsysorg/sglang:v0.5.23-cu129``)."""
    declared = spec.option("sglang_version")
    if declared:
        v = parse_version(str(declared))
        if v is None:
            raise ConfigError(
                f"engine {spec.label!r}: options.sglang_version {declared!r} is not X.Y.Z"
            )
        return v
    if spec.image:
        return parse_version(spec.image.rpartition(":")[2])
    return parse_version(installed_version(spec.python or sys.executable))


def algorithm(spec: EngineSpec) -> str:
    """SGLang's ``--speculative-algorithm`` for a speculative spec (one message for a method
    SGLang does not run, wherever it is found first: the version check or the command)."""
    algo = ALGORITHMS.get(spec.method)
    if algo is None:
        raise ConfigError(
            f"engine {spec.label!r}: method {spec.method!r} is not one SGLang runs "
            f"({', '.join([NATIVE, *ALGORITHMS])})"
        )
    return algo


def check_supported(spec: EngineSpec, version: Version | None) -> None:
    """Fail fast when the method is not one SGLang runs or the installed version lacks it."""
    where = f"engine {spec.label!r}"
    if spec.method == NATIVE:
        return
    algo = algorithm(spec)
    if version is None:
        raise ConfigError(
            f"{where}: cannot tell which SGLang version runs (no sglang package for "
            f"{spec.python or sys.executable}{', image ' + spec.image if spec.image else ''}); "
            "set options.sglang_version"
        )
    since = Version(ALGORITHM_SINCE[algo])
    if version < since:
        raise ConfigError(
            f"{where}: SGLang {version} does not support method {spec.method} "
            f"(--speculative-algorithm {algo} exists from SGLang {since})"
        )

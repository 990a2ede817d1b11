"""The ``sglang`` engine-environment recipe (the small parser env) and the harness that runs
SGLang's own argument parser in it over specperf's commands."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Sequence
from typing import Any

from specperf.engine_envs import EnvInstallError, EnvRecipe, parse_requirement
from specperf.engines.sglang.versions import KIND
from specperf.errors import ConfigError, EngineStartError

# The smallest install in which SGLang's own argument parser runs (no GPU, no CUDA torch): the
# wheel without its dependencies (pip --no-deps) plus the exact closure of what
# `sglang.srt.server_args` and `prepare_server_args` import, pinned. torch is the CPU build that
# lies on this machine's disk (2.13.0+cpu); triton, imported at module level by sglang's utils,
# too (3.8.0). 0.5.2 resolves its args at parse time, so it also needs transformers (its own
# pin, 4.56.1), openai (1.99.1) and the model-config imports. Creation time: docs/sglang.md.
# Serving needs the full CUDA install (`pip install sglang==X`), which this recipe is not.
PARSER_PINS: dict[str, tuple[str, ...]] = {}


def _pins(text: str) -> tuple[str, ...]:
    return tuple(text.split())


PARSER_PINS["0.5.23"] = _pins(
    """aiohappyeyeballs==2.7.1 aiohttp==3.14.5 aiosignal==1.4.0 annotated-types==0.8.0
    anyio==4.16.0 asttokens==3.0.2 attrs==26.1.0 certifi==2026.10.19.post1
    charset-normalizer==3.5.3 executing==2.3.0 filelock==4.3.1 frozenlist==1.8.0
    fsspec==2026.9.0 idna==3.20 ipython==9.18.1 ipython_pygments_lexers==1.1.1 jedi==0.20.1
    Jinja2==3.1.6 MarkupSafe==3.0.4 matplotlib-inline==0.2.2 mpmath==1.3.0 msgspec==0.23.0
    multidict==7.2.1 networkx==3.6.1 numpy==2.4.6 orjson==3.13.0 packaging==26.4 parso==0.8.7
    pexpect==4.9.0 pillow==13.0.0 prompt_toolkit==3.0.53 propcache==0.5.4 psutil==7.2.2
    ptyprocess==0.7.0 pure_eval==0.2.4 pybase64==1.5.1 pydantic==2.14.4 pydantic_core==2.50.5
    Pygments==2.21.0 pyzmq==27.3.0 requests==2.34.2 stack-data==0.6.3 starlette==1.10.0
    sympy==1.14.0 torch==2.13.0 tqdm==4.70.1 traitlets==5.16.1 triton==3.8.0
    typing-inspection==0.4.5 typing_extensions==4.16.0 urllib3==2.8.0 wcwidth==0.9.4
    yarl==1.25.1"""
)
PARSER_PINS["0.5.2"] = _pins(
    """aiohappyeyeballs==2.7.1 aiohttp==3.14.5 aiosignal==1.4.0 annotated-doc==0.0.7
    annotated-types==0.8.0 anyio==4.16.0 asttokens==3.0.2 attrs==26.1.0
    certifi==2026.10.19.post1 charset-normalizer==3.5.3 compressed-tensors==0.20.1 dill==0.4.1
    distro==1.9.0 einops==0.8.2 executing==2.3.0 fastapi==0.165.0 filelock==4.3.1
    frozenlist==1.8.0 fsspec==2026.9.0 h11==0.16.0 hf-xet==1.8.0 httpcore==1.0.9 httpx==0.28.1
    huggingface_hub==0.36.2 idna==3.20 ipython==9.18.1 ipython_pygments_lexers==1.1.1
    jedi==0.20.1 Jinja2==3.1.6 jiter==0.19.0 loguru==0.7.3 MarkupSafe==3.0.4
    matplotlib-inline==0.2.2 mpmath==1.3.0 msgspec==0.23.0 multidict==7.2.1 networkx==3.6.1
    numpy==2.4.6 openai==1.99.1 opentelemetry-api==1.45.2 orjson==3.13.0 packaging==26.4
    parso==0.8.7 partial-json-parser==0.2.1.1.post7 pexpect==4.9.0 pillow==13.0.0
    prompt_toolkit==3.0.53 propcache==0.5.4 psutil==7.2.2 ptyprocess==0.7.0 pure_eval==0.2.4
    pybase64==1.5.1 pydantic==2.14.4 pydantic_core==2.50.5 Pygments==2.21.0 PyYAML==6.0.4
    pyzmq==27.3.0 regex==2026.11.19 requests==2.34.2 safetensors==0.8.0 sentencepiece==0.2.3
    sniffio==1.3.1 stack-data==0.6.3 starlette==1.10.0 sympy==1.14.0 tokenizers==0.22.2
    torch==2.13.0 tqdm==4.70.1 traitlets==5.16.1 transformers==4.56.1 triton==3.8.0
    typing-inspection==0.4.5 typing_extensions==4.16.0 urllib3==2.8.0 wcwidth==0.9.4
    yarl==1.25.1"""
)
# the release the parser pins were last resolved for (newer releases take its closure)
LATEST_PINNED = "0.5.23"
# Verify = SGLang's own parser on an EAGLE3 command for a local config-only model (0.5.2
# resolves its arguments while parsing and reads the model config: no hub, no weights).
_ENV_VERIFY_SCRIPT = r"""
import json, os, shutil, tempfile
from sglang.srt.server_args import prepare_server_args
root = tempfile.mkdtemp(prefix="specperf-sglang-verify-")
cfg = {"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 2,
       "num_key_value_heads": 1, "head_dim": 32, "vocab_size": 256, "rms_norm_eps": 1e-6,
       "max_position_embeddings": 512, "rope_theta": 10000, "hidden_act": "silu",
       "torch_dtype": "bfloat16"}
for name, extra in (("target", {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
                                "num_hidden_layers": 2}),
                    ("draft", {"architectures": ["LlamaForCausalLMEagle3"],
                               "model_type": "llama", "num_hidden_layers": 1,
                               "draft_vocab_size": 256})):
    os.makedirs(os.path.join(root, name))
    with open(os.path.join(root, name, "config.json"), "w") as fh:
        json.dump({**cfg, **extra}, fh)
a = prepare_server_args([
    "--model-path", os.path.join(root, "target"), "--device", "cpu",
    "--mem-fraction-static", "0.8", "--speculative-algorithm", "EAGLE3",
    "--speculative-draft-model-path", os.path.join(root, "draft"),
    "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
    "--speculative-num-draft-tokens", "4"])
assert (a.speculative_algorithm, a.speculative_num_steps) == ("EAGLE3", 3), a
shutil.rmtree(root, ignore_errors=True)
print("sglang parser ok")
"""


def env_recipe(requirement: str, release: Any = None, torch_build: str = "pinned") -> Any:
    """Recipe for ``specperf env create sglang==X``: the parser env (see above).

    From the release's own metadata: its Requires-Python (checked), and the exact pins it states
    for the parser closure's packages (e.g. 0.5.2's ``transformers==4.56.1``), which replace the
    closure's versions. PARSER_PINS (hand-resolved closures) override for the releases it names;
    any other release takes the closure of the nearest named release at or below it (else the
    latest). torch and triton stay the CPU builds on this machine's disk whatever the release
    pins (its CUDA torch is not needed to parse); that pin goes to the notes."""
    dist, version = parse_requirement(requirement)
    if dist != "sglang":
        raise ConfigError(f"{requirement}: the sglang recipe knows sglang==X")
    problem = release.python_ok() if release is not None else None
    if problem:
        raise EnvInstallError(requirement, problem)
    notes: list[str] = []
    if version in PARSER_PINS:
        pins = PARSER_PINS[version]
    else:
        closure = closure_for(version)
        pins, changed = _release_pins(PARSER_PINS[closure], release)
        notes.append(
            f"parser closure of sglang {closure}"
            + (f", with the release's own pins {' '.join(changed)}" if changed else "")
        )
    # the parser env's torch is never the release's: its pin goes to the notes, not torch_pin
    release_torch = release.pin("torch", SGLANG_EXTRAS) if release is not None else None
    if release_torch:
        notes.append(f"torch: the CPU build on disk (the release pins torch=={release_torch})")
    return EnvRecipe(
        kind=KIND,
        requirement=requirement,
        name=f"sglang-{version}",
        install=("--no-deps", f"sglang=={version}", *pins),
        verify=_ENV_VERIFY_SCRIPT,
        versions=("sglang", "torch", "triton", "transformers"),
        notes=tuple(notes),
        disk_gb=3.0,
    )


# extras whose requirements a served sglang installs (older releases keep their pins there)
SGLANG_EXTRAS = ("srt", "runtime-common")
# kept from this machine's disk whatever the release pins (the parser never runs a kernel)
_DISK_BUILDS = {"torch", "triton"}


def closure_for(version: str) -> str:
    """The PARSER_PINS release whose closure ``version`` takes: the nearest at or below it."""
    from packaging.version import InvalidVersion, Version

    try:
        v = Version(version)
        below = [k for k in PARSER_PINS if Version(k) <= v]
    except InvalidVersion:
        return LATEST_PINNED
    return max(below, key=Version) if below else LATEST_PINNED


def _release_pins(pins: tuple[str, ...], release: Any) -> tuple[tuple[str, ...], list[str]]:
    """``pins`` with each version the release itself pins exactly (markers evaluated here)."""
    if release is None:
        return pins, []
    out, changed = [], []
    for pin in pins:
        name, _, version = pin.partition("==")
        own = None if name.lower() in _DISK_BUILDS else release.pin(name, SGLANG_EXTRAS)
        if own and own != version:
            out.append(f"{name}=={own}")
            changed.append(f"{name}=={own}")
        else:
            out.append(pin)
    return tuple(out), changed


def parse_check_script() -> str:
    """Python run IN the sglang env: parse each JSON argv (stdin) with SGLang's own
    ``prepare_server_args`` and print the parsed values (stdout, one JSON document)."""
    return _PARSE_CHECK


_PARSE_CHECK = r"""
import contextlib, io, json, sys, importlib.metadata as md
from sglang.srt.server_args import prepare_server_args
try:
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
except Exception:
    SpeculativeAlgorithm = None
FIELDS = ("model_path", "host", "port", "served_model_name", "tokenizer_path", "dtype",
          "context_length", "max_running_requests", "chunked_prefill_size", "mem_fraction_static",
          "tp_size", "disable_radix_cache", "disable_cuda_graph", "reasoning_parser",
          "enable_metrics", "device", "speculative_algorithm", "speculative_draft_model_path",
          "speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens",
          "speculative_ngram_max_bfs_breadth", "speculative_ngram_min_bfs_breadth",
          "speculative_adaptive", "decode_log_interval")
out = {"version": md.version("sglang"), "results": []}
for argv in json.load(sys.stdin):
    res = {"argv": argv}
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            a = prepare_server_args(list(argv))
        res["parsed"] = {f: getattr(a, f, None) for f in FIELDS if hasattr(a, f)}
        algo = res["parsed"].get("speculative_algorithm")
        if algo and SpeculativeAlgorithm is not None:
            res["known_algorithm"] = SpeculativeAlgorithm.from_string(algo).name
    except SystemExit as exc:
        res["error"] = "argparse exit %s: %s" % (exc.code, err.getvalue().strip()[-500:])
    except Exception as exc:
        res["error"] = "%s: %s" % (type(exc).__name__, exc)
    out["results"].append(res)
json.dump(out, sys.stdout, default=str)
"""


def parse_with_sglang(python: str, argvs: Sequence[Sequence[str]], timeout_s: float = 300) -> dict:
    """Run SGLang's own parser (in its env) over ``argvs``; returns version + per-argv results."""
    proc = subprocess.run(
        [python, "-c", _PARSE_CHECK],
        input=json.dumps([list(a) for a in argvs]),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    if proc.returncode != 0:
        raise EngineStartError(
            f"SGLang parser check failed in {python} (exit {proc.returncode}): "
            f"{proc.stderr.strip()[-800:]}"
        )
    return json.loads(proc.stdout.strip().splitlines()[-1])

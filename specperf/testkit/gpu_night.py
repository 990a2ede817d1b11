"""``specperf gpu-night``: the GPU suite on a CUDA box, end to end. It builds random-weight
model configs of real shapes, fits the suite's EAGLE3 head on that machine, runs ``pytest -m perf
-n 1`` with the h200-transformers suite (a pass that writes the baseline and/or a pass that checks
against it), samples NVML beside it, and reports the figures.

    specperf gpu-night --out OUT                 # fit, then both passes (update, then check)
    specperf gpu-night --out OUT --passes update # one pass
    specperf gpu-night --out OUT --passes fit    # the head fit alone (a step of its own)
    specperf gpu-night --out OUT --shapes tiny --device cpu   # dry run without a GPU
    specperf gpu-night --out OUT --passes check --eagle3-head random -- --method eagle3
                                                 # the MAL gate must FAIL (see below)

Where specperf is not installed (a bare CUDA image), ``python -m specperf.testkit.gpu_night``
from the repository root is the same command. The suite repository (its
``tests/perf`` and ``baselines/``) is ``--root``: by default the checkout this package is imported
from, else the working directory; engines are started with that checkout first on PYTHONPATH.

EAGLE3's head is fitted to the random target first (``python -m specperf.testkit.eagle3_fit
--suite …``: on the engine's own path, deterministic, cached under the models folder by its recipe
digest; OUT/fit.json, OUT/fit.log) and handed to the suite with its identity
(``fit:<name>@<digest>``). The head covers exactly the measured prompts of the suite's request
count, which the suite pins (``[workload] size_to_min_duration = false``), so the served MAL
equals the fit-time MAL whatever the machine: a ``FIT-MAL`` line per EAGLE3 item compares them
start by start. ``--passes fit`` stops after the fit: on a host where fit + check would not end
inside one device call, run ``--passes fit`` and then ``--passes check`` on the same machine (the
second finds the head in its cache, the first leaves the compile cache warm). Each step prints
``STEP <name>: <seconds> s``. ``--eagle3-head random`` swaps in a random head of the same shape
UNDER THE FITTED HEAD'S IDENTITY — a deliberate regression (an EAGLE3 that accepts nothing),
which a check against a baseline of the fitted head must fail on MAL.

Ends with one ``VERDICT <pass> <item>: PASS|FAIL|…`` line per item (paste them in the review:
docs/transformers.md says when). Writes OUT/gpu_run.json (everything), OUT/pytest-<pass>.log,
the baseline file it wrote and OUT/results.tar.gz (every item's summary.json, requests.jsonl,
engine logs), and ``host`` (hostname, boot id, GPU UUIDs: which machine this was); prints the
tables
(``--markdown OUT/gpu_run.json`` prints them again from a saved run).

Figures reported per item: output tok/s, TPOT/TTFT p50, decode tok/s p50, MAL; for EAGLE3 the
per-step cost split (draft phase and verify phase seconds per verify step, from the engine's
counters) against native's per-token step (TPOT p50); native's share of the HBM roofline
(roofline tok/s = HBM bandwidth / bf16 weight bytes; the bandwidth is the GPU's datasheet figure,
4.8 TB/s for an H200, 3.35 for an H100 SXM, or --hbm-tb-s); NVML per item (clocks, power,
temperature, throttle reasons, memory) from samples inside each item's window.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import textwrap
import time
from pathlib import Path
from typing import Any

from specperf.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]  # the checkout (or site folder) holding specperf/

SUITE = ROOT / "specperf" / "suites" / "h200-transformers.toml"
TIMED_OUT = 124  # a pass stopped at --pass-timeout (as timeout(1) exits)
# Memory bandwidth per GPU product, from NVIDIA's datasheets, for the roofline line: first match of
# the name torch reports wins (more specific names first). A GPU not listed gets no roofline
# unless --hbm-tb-s is given, rather than another card's figure.
HBM_BYTES_PER_S: tuple[tuple[str, float | None], ...] = (
    ("GH200", None),  # 4.0 (HBM3) or 4.9 TB/s (HBM3e) by its memory: the name does not say
    ("H200", 4.8e12),
    ("H100 NVL", 3.9e12),
    ("H100 PCIe", 2.0e12),
    ("H100", 3.35e12),  # SXM5, "NVIDIA H100 80GB HBM3"
    ("A100-SXM4-80GB", 2.039e12),
    ("A100 80GB PCIe", 1.935e12),
    ("A100", 1.555e12),  # 40 GB, SXM4 and PCIe
    ("L40S", 0.864e12),
    ("L40", 0.864e12),
)


def hbm_bytes_per_s(gpu_name: str) -> float | None:
    """The datasheet memory bandwidth of the GPU torch names (None: not in the table)."""
    return next((bw for key, bw in HBM_BYTES_PER_S if key in gpu_name), None)


# Real shapes (public config.json values) — random weights are made from these on the device.
QWEN3_8B = {
    "hidden_size": 4096,
    "intermediate_size": 12288,
    "num_hidden_layers": 36,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 151936,
    "max_position_embeddings": 40960,
    "tie_word_embeddings": False,
}
QWEN3_06B = {
    "hidden_size": 1024,
    "intermediate_size": 3072,
    "num_hidden_layers": 28,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 151936,
    "max_position_embeddings": 40960,
    "tie_word_embeddings": True,
}
EAGLE3_8B = {  # the published Qwen3-8B EAGLE3 heads' shape
    "hidden_size": 4096,
    "intermediate_size": 12288,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 151936,
    "draft_vocab_size": 32000,
    "aux": [2, 18, 33],
    "max_position_embeddings": 40960,
}
TINY_T = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "max_position_embeddings": 4096,
    "tie_word_embeddings": False,
}
TINY_D = {**TINY_T, "num_hidden_layers": 2, "tie_word_embeddings": True}
TINY_E = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "draft_vocab_size": 512,
    "aux": [1, 2, 3],
    "max_position_embeddings": 4096,
}


def qwen3_config(shape: dict[str, Any], eos: int, bos: int) -> dict[str, Any]:
    return {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "hidden_act": "silu",
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "rope_scaling": None,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "use_sliding_window": False,
        "sliding_window": None,
        "max_window_layers": shape["num_hidden_layers"],
        "initializer_range": 0.02,
        "use_cache": True,
        "bos_token_id": bos,
        "eos_token_id": eos,
        "torch_dtype": "bfloat16",
        **shape,
    }


def eagle3_config(shape: dict[str, Any]) -> dict[str, Any]:
    from specperf.eagle3.config import Eagle3Config

    s = dict(shape)
    aux = tuple(s.pop("aux"))
    cfg = Eagle3Config(
        aux_layer_ids=aux,
        target_hidden_size=s["hidden_size"],
        rope_theta=1000000.0,
        **s,
    )
    return {**cfg.to_json(), "torch_dtype": "bfloat16"}


def build_models(models_dir: Path, shapes: str) -> dict[str, str]:
    """config.json (+ the tiny tokenizer, whose ids the random model's vocabulary covers) for
    target, draft and EAGLE3 head. The tokenizer has 2048 tokens: ids above decode to nothing,
    and the token ids streamed per chunk carry the output."""
    from specperf.testkit.models import ensure_tiny_model

    tiny = ensure_tiny_model()
    tok_cfg = json.loads((tiny / "config.json").read_text())
    eos, bos = int(tok_cfg["eos_token_id"]), int(tok_cfg["bos_token_id"])
    if shapes == "qwen3-8b":
        target, draft, head = QWEN3_8B, QWEN3_06B, EAGLE3_8B
    else:
        vocab = int(tok_cfg["vocab_size"])
        target, draft = {**TINY_T, "vocab_size": vocab}, {**TINY_D, "vocab_size": vocab}
        head = {**TINY_E, "vocab_size": vocab}
    out = {}
    for name, cfg in (
        ("qwen3-8b-shape", qwen3_config(target, eos, bos)),
        ("qwen3-0.6b-shape", qwen3_config(draft, eos, bos)),
        ("qwen3-8b-eagle3-shape", eagle3_config(head)),
    ):
        d = models_dir / name
        d.mkdir(parents=True, exist_ok=True)
        (d / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
        if "eagle3" not in name:
            for f in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
                shutil.copy(tiny / f, d / f)
            gen = {"eos_token_id": eos, "bos_token_id": bos, "pad_token_id": 0}
            (d / "generation_config.json").write_text(json.dumps(gen) + "\n")
        out[name] = str(d)
    return out


FIT_NAME = "qwen3-8b-eagle3-fit"
SHAPE_HEAD = "qwen3-8b-eagle3-shape"
RANDOM_HEAD = "qwen3-8b-eagle3-random"
RANDOM_HEAD_SEED = 20261201


def suite_settings(args: argparse.Namespace, models_dir: Path) -> dict[str, str]:
    """--setting values for the suite: models, device, and the EAGLE3 head chosen by
    prepare_eagle3_head (``args.head_settings``)."""
    return {
        "models_dir": str(models_dir),
        "device": args.device,
        **getattr(args, "head_settings", {}),
    }


def fit_command(args: argparse.Namespace, models_dir: Path, out: Path) -> list[str]:
    cmd = [
        sys.executable,
        "-m",
        "specperf.testkit.eagle3_fit",
        "--suite",
        str(getattr(args, "suite", SUITE)),
    ]
    for k, v in suite_settings(args, models_dir).items():
        cmd += ["--setting", f"{k}={v}"]
    cmd += ["--head-shape", str(models_dir / SHAPE_HEAD), "--out-root", str(models_dir)]
    cmd += ["--name", FIT_NAME, "--json", str(out)]
    if args.fit_steps:
        cmd += ["--steps", str(args.fit_steps)]
    return cmd


def write_random_head(shape_dir: Path, like: Path, out: Path, seed: int) -> Path:
    """A random head with the fitted head's config (and its draft vocabulary), saved as the
    fitted one is: what "the head swapped for a random one" means."""
    import torch

    from specperf.eagle3.checkpoint import new_head, read_state, save_head
    from specperf.eagle3.config import load_config

    cfg = load_config(like)
    d2t = read_state(like)["d2t"].long()
    head = new_head(cfg, d2t + torch.arange(cfg.draft_vocab_size), seed=seed)
    save_head(head, out, dtype=torch.bfloat16)
    (out / "README.md").write_text(
        f"random EAGLE3 head (seed {seed}) with the config of {like.name}: a deliberate\n"
        "regression for specperf gpu-night --eagle3-head random\n"
    )
    return out


def prepare_eagle3_head(args: argparse.Namespace, models_dir: Path) -> dict[str, Any]:
    """Fit (or find cached) the EAGLE3 head for the suite's random target and set
    ``args.head_settings``; with ``--eagle3-head random`` swap a random head in under the fitted
    head's identity. Returns what happened (for gpu_run.json)."""
    out = args.out / "fit.json"
    env = {**repo_env(), "CUBLAS_WORKSPACE_CONFIG": ":4096:8", "PYTHONUNBUFFERED": "1"}
    t0 = time.monotonic()
    cmd = fit_command(args, models_dir, out)
    print(f"== eagle3 head fit: {' '.join(cmd)}", flush=True)
    code = run_logged(cmd, env, args.out / "fit.log", args.fit_timeout)
    seconds = round(time.monotonic() - t0, 1)
    tail = (args.out / "fit.log").read_text(errors="replace").splitlines()[-12:]
    print("\n".join(tail), flush=True)
    if code != 0 or not out.exists():
        print(f"EAGLE3 head fit FAILED (exit {code}); the eagle3 item will not start", flush=True)
        return {"exit_code": code, "seconds": seconds}
    info = json.loads(out.read_text())
    fitted = Path(info["path"])
    head_dir, identity = fitted, info["identity"]
    if args.eagle3_head == "random":
        head_dir = write_random_head(
            models_dir / SHAPE_HEAD, fitted, models_dir / RANDOM_HEAD, RANDOM_HEAD_SEED
        )
        print(
            f"EAGLE3 head SWAPPED: {head_dir} (random, seed {RANDOM_HEAD_SEED}) under the fitted "
            f"head's identity {identity} — a deliberate regression; the MAL gate must fail",
            flush=True,
        )
    args.head_settings = {
        "eagle3_head": str(head_dir.relative_to(models_dir)),
        "eagle3_head_revision": identity,
    }
    fit = info.get("fit") or {}
    print(
        f"EAGLE3 head {identity} ({'cached' if info.get('cached') else 'fitted'} in {seconds} s"
        f"; weights sha256 {fit.get('weights_sha256', '?')[:16]}; fit-time MAL "
        f"{fit_time_mal(fit)})",
        flush=True,
    )
    return {
        "exit_code": code,
        "seconds": seconds,
        "identity": identity,
        "path": str(head_dir),
        "fitted_path": str(fitted),
        "cached": info.get("cached"),
        "swapped_for_random": args.eagle3_head == "random",
        "weights_sha256": fit.get("weights_sha256"),
        "fit_time_mal": None if args.eagle3_head == "random" else fit_time_mal(fit),
    }


def fit_time_mal(fit: dict[str, Any]) -> float | None:
    """The MAL the fit measured on the suite's prompts through the served path (fit.json)."""
    return ((fit.get("evaluation") or {}).get("suite") or {}).get("mean_acceptance_length")


def host_identity() -> dict[str, Any]:
    """Which machine this is: hostname, kernel boot id, machine id, GPUs (name, UUID, PCI bus).
    Two device windows may be the same physical host: the GPU UUID tells."""
    out: dict[str, Any] = {"hostname": socket.gethostname()}
    for key, path in (
        ("boot_id", "/proc/sys/kernel/random/boot_id"),
        ("machine_id", "/etc/machine-id"),
    ):
        try:
            out[key] = Path(path).read_text().strip()
        except OSError:
            out[key] = None
    try:
        q = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,uuid,pci.bus_id,serial", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        fields = ("name", "uuid", "pci_bus_id", "serial")
        out["gpus"] = [
            dict(zip(fields, (f.strip() for f in line.split(",")), strict=False))
            for line in q.stdout.splitlines()
            if line.strip()
        ]
    except (OSError, subprocess.SubprocessError) as exc:
        out["gpus"] = f"nvidia-smi failed: {exc}"
    return out


def baseline_contents(folder: Path) -> dict[str, bytes]:
    """Each baseline file's bytes, to tell afterwards which files this run changed (an mtime
    does not: a folder seeded by ``cp`` just before the run looks freshly written)."""
    return {f.name: f.read_bytes() for f in folder.glob("*.json")}


def annotate_starts(path: Path, since: str, host: dict[str, Any]) -> int:
    """Add ``gpu_uuid`` to the baseline starts this run wrote (date >= ``since`` and this
    hostname): the device machines may share a hostname, the GPU UUID tells hosts apart. The
    product writes ``boot_id`` itself; it is filled in here only where a start lacks it.
    Returns how many starts were annotated."""
    from specperf.baselines import write_atomic

    data = json.loads(path.read_text())
    gpus = host.get("gpus") if isinstance(host.get("gpus"), list) else []
    uuid = ",".join(g.get("uuid", "?") for g in gpus) or None
    n = 0
    for entry in (data.get("entries") or {}).values():
        for metric in (entry.get("metrics") or {}).values():
            for st in metric.get("starts") or []:
                if (
                    str(st.get("date") or "") >= since
                    and st.get("host") == host["hostname"]
                    and "gpu_uuid" not in st
                ):
                    st["gpu_uuid"] = uuid
                    st.setdefault("boot_id", host.get("boot_id"))
                    n += 1
    if n:
        write_atomic(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    return n


def gpu_indices() -> list[int]:
    try:
        import torch

        return list(range(torch.cuda.device_count()))
    except Exception:
        return []


def perf_pytest(tests: str = "tests/perf") -> list[str]:
    """``python -m pytest TESTS -m perf`` with the plugin loaded by -p where it is not installed
    (the bare CUDA image has no entry point)."""
    from importlib.metadata import entry_points

    cmd = [sys.executable, "-m", "pytest", tests, "-m", "perf"]
    if not any(ep.value.startswith("specperf") for ep in entry_points(group="pytest11")):
        cmd += ["-p", "specperf.plugin"]
    return [*cmd, "-p", "no:cacheprovider", "-rA", "--benchmark-disable"]


def repo_env() -> dict[str, str]:
    """This environment with the checkout first on PYTHONPATH."""
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }


def run_logged(
    cmd: list[str], env: dict[str, str], log: Path, timeout_s: float, cwd: Path = ROOT
) -> int:
    """Run ``cmd`` in its own session with output to ``log``; past ``timeout_s`` TERM then KILL
    the whole group (engines die with their owner: ServerProcess watchdog) and return 124."""
    with log.open("w") as fh:
        proc = subprocess.Popen(
            cmd, cwd=cwd, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            return proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            fh.write(f"\n# stopped after {timeout_s:.0f} s\n")
            return TIMED_OUT


def run_pass(
    name: str, args: argparse.Namespace, models_dir: Path, results: Path, log: Path
) -> dict[str, Any]:
    """One ``pytest -m perf -n 1`` pass with NVML sampled in this process meanwhile."""
    from specperf.environment import GpuSampler

    cmd = [*perf_pytest(), "-n", "1", "--suite", str(getattr(args, "suite", SUITE))]
    for k, v in suite_settings(args, models_dir).items():
        cmd += ["--setting", f"{k}={v}"]
    cmd += ["--results-dir", str(results), "--baselines-dir", str(args.baselines_dir)]
    if name == "update":
        cmd += ["--update-baselines"]
    cmd += args.pytest_args
    env = repo_env()
    print(f"== pass {name}: {' '.join(cmd)}", flush=True)
    sampler = GpuSampler(gpu_indices(), interval_s=0.25)
    wall0 = time.time()  # sample t=0 (the sampler counts from its start)
    sampler.start()
    started = time.time()
    code = run_logged(cmd, env, log, args.pass_timeout, cwd=args.root)
    sampler.stop()
    tail = log.read_text(errors="replace").splitlines()[-25:]
    print("\n".join(tail), flush=True)
    return {
        "pass": name,
        "command": cmd,
        "exit_code": code,
        "seconds": round(time.time() - started, 1),
        "results_dir": str(results),
        "samples": sampler.samples,
        "sampler_error": sampler.error,
        "samples_wall0": wall0,
        "log_tail": tail,
    }


def _pct(stats: Any, key: str = "p50") -> float | None:
    return stats.get(key) if isinstance(stats, dict) else None


def item_figures(summary: dict[str, Any]) -> dict[str, Any]:
    eng = (summary.get("environment") or {}).get("engine") or {}
    cfg = eng.get("server_config") or {}
    backend = cfg.get("backend") or {}
    before = (summary.get("counters") or {}).get("before") or {}
    after = (summary.get("counters") or {}).get("after") or {}
    bx, ax = before.get("extra") or {}, after.get("extra") or {}
    drafts = (after.get("drafts") or 0) - (before.get("drafts") or 0)
    fig: dict[str, Any] = {
        "method": summary.get("method"),
        "completed": summary.get("completed"),
        "failed": summary.get("failed"),
        "output_tokens": summary.get("output_tokens"),
        "output_tok_s": summary.get("output_throughput_tok_s"),
        "tpot_ms_p50": _pct(summary.get("tpot_ms")),
        "ttft_ms_p50": _pct(summary.get("ttft_ms")),
        "decode_tok_s_p50": _pct(summary.get("decode_tok_s")),
        "tokens_per_chunk": summary.get("tokens_per_chunk"),
        "mal": summary.get("mean_acceptance_length"),
        "acceptance_rate": summary.get("acceptance_rate"),
        "per_position": summary.get("per_position_acceptance"),
        "fast_path": backend.get("fast_path"),
        "startup_s": eng.get("startup_s"),
        "weight_bytes": cfg.get("weight_bytes"),
        "device_name": cfg.get("device_name"),
        "versions": cfg.get("versions"),
        "cuda_max_memory_allocated_gib": round(ax["cuda_max_memory_allocated_bytes"] / 2**30, 2)
        if "cuda_max_memory_allocated_bytes" in ax
        else None,
        "cuda_memory_reserved_gib": round(ax["cuda_memory_reserved_bytes"] / 2**30, 2)
        if "cuda_memory_reserved_bytes" in ax
        else None,
        "engine_pid": eng.get("pid"),
        "notes": summary.get("notes"),
        "num_requests": summary.get("num_requests"),
        "sizing": summary.get("sizing"),
        "mal_per_start": [r.get("mean_acceptance_length") for r in summary.get("repeats") or []],
    }
    if drafts and "draft_time_s" in ax:
        fig["draft_ms_per_step"] = 1000 * (ax["draft_time_s"] - bx.get("draft_time_s", 0)) / drafts
        fig["verify_ms_per_step"] = (
            1000 * (ax["verify_time_s"] - bx.get("verify_time_s", 0)) / drafts
        )
    return fig


def collect(passes: list[dict[str, Any]], hbm: float | None) -> dict[str, Any]:
    from specperf.environment import summarize_samples

    out: dict[str, Any] = {}
    for p in passes:
        rows: dict[str, Any] = {}
        for s_path in sorted(Path(p["results_dir"]).glob("*/summary.json")):
            s = json.loads(s_path.read_text())
            fig = item_figures(s)
            wc = s.get("wall_clock") or {}
            if p["samples"] and wc:
                lo, hi = wc["started"] - p["samples_wall0"], wc["finished"] - p["samples_wall0"]
                window = [r for r in p["samples"] if lo <= r["t"] <= hi]
                allowed = {fig["engine_pid"]} if fig["engine_pid"] else set()
                fig["nvml"] = summarize_samples(window, allowed)
            rows[s_path.parent.name] = fig
        native = next((f for f in rows.values() if f["method"] == "native"), None)
        for f in rows.values():
            if native and native.get("output_tok_s") and f.get("output_tok_s"):
                f["speedup_vs_native"] = f["output_tok_s"] / native["output_tok_s"]
            if native and f.get("draft_ms_per_step") is not None and native.get("tpot_ms_p50"):
                step = f["draft_ms_per_step"] + f["verify_ms_per_step"]
                f["eagle3_step_ms"] = step
                f["native_step_ms"] = native["tpot_ms_p50"]
                f["overhead_ms_per_step"] = step - native["tpot_ms_p50"]
                f["overhead_ratio"] = step / native["tpot_ms_p50"]
        roof = None
        if hbm and native and native.get("weight_bytes"):
            roof_tok_s = hbm / native["weight_bytes"]
            dec = native.get("decode_tok_s_p50")
            roof = {
                "weight_gb": native["weight_bytes"] / 1e9,
                "hbm_tb_s": hbm / 1e12,
                "roofline_tok_s": roof_tok_s,
                "native_decode_tok_s_p50": dec,
                "native_share": dec / roof_tok_s if dec else None,
                "native_output_tok_s_share": (native.get("output_tok_s") or 0) / roof_tok_s,
            }
        out[p["pass"]] = {
            "verdicts": verdict_lines(
                Path(p["results_dir"]), p["pass"], stopped=p["exit_code"] == TIMED_OUT
            ),
            "exit_code": p["exit_code"],
            "seconds": p["seconds"],
            "items": rows,
            "roofline": roof,
            "nvml_all": summarize_samples(p["samples"]) if p["samples"] else None,
            "sampler_error": p["sampler_error"],
        }
    return out


# the figures a reviewer reads first in a verdict line, in this order
VERDICT_METRICS = ("output_throughput_tok_s", "ttft_ms.p50", "mean_acceptance_length")


def _read_checks(results_dir: Path) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list]]:
    """The pass's checks grouped by item, and its session-level checks (no item: the engine-wide
    check, cross-engine rules) grouped by key. From the controller's ``verdict.json``, which
    holds every check of the pass once it has ended; a pass cut before that has only
    ``verdicts.jsonl``, appended as items end (read with its torn last line tolerated)."""
    from specperf.fileio import read_jsonl

    whole, partial = results_dir / "verdict.json", results_dir / "verdicts.jsonl"
    if whole.exists():
        checks = json.loads(whole.read_text()).get("checks") or []
    else:
        checks = read_jsonl(partial) if partial.exists() else []
    items: dict[str, list[dict[str, Any]]] = {}
    session: dict[str, list[dict[str, Any]]] = {}
    for c in checks:
        if c.get("item") is not None:
            items.setdefault(str(c["item"]), []).append(c)
        else:
            session.setdefault(str(c.get("key")), []).append(c)
    return items, session


def _verdict_word(cs: list[dict[str, Any]], stopped: bool) -> tuple[str, list[dict[str, Any]]]:
    """PASS / FAIL / INCOMPLETE / NOT EVALUATED for a group of checks, and the checks to name."""
    failed = [c for c in cs if c.get("status") == "fail"]
    unevaluated = [c for c in cs if c.get("status") in ("missing", "stale", "not_evaluated")]
    if not cs and stopped:
        return "NOT EVALUATED (the pass was stopped at its time limit before the item ended)", []
    if not cs:
        return "NOT EVALUATED (no checks recorded)", []
    if failed:
        return f"FAIL ({len(failed)} of {len(cs)} checks failed)", failed + unevaluated
    if unevaluated:
        return f"INCOMPLETE ({len(unevaluated)} of {len(cs)} checks not evaluated)", unevaluated
    return f"PASS ({len(cs)} checks)", []


def _figure(c: dict[str, Any]) -> str:
    f = f"{c['metric']} {c['measured']:.4g}"
    if c.get("baseline") is not None:
        f += f" vs {c['baseline']:.4g}"
    if c.get("delta") is not None:
        f += f" ({c['delta']:+.1%})"
    return f


def verdict_lines(results_dir: Path, pass_name: str, *, stopped: bool = False) -> list[str]:
    """One line per item of a pass, to paste in a review (docs/transformers.md: a change to the
    transformers engine or specperf/eagle3/ is checked on the GPU before it lands):

        VERDICT check qwen3-8b-shape/transformers/eagle3/…: PASS (14 checks) tok/s 61.2 vs
        baseline 60.5 (+1.2%); …

    then one line per session-level check group (``VERDICT check engine transformers-loop:
    FAIL …`` for the engine-wide check, one per cross-engine rule): those are judged once the
    whole pass has ended and can turn a pass red whose every item passed. FAIL names every
    failed check; an item without checks
    (it did not run) says so — "not evaluated" is never a pass — and says when the pass was
    stopped at its time limit (``stopped``: --pass-timeout / --budget-s), so a cut pass is not read
    as an empty one."""
    checks, session = _read_checks(results_dir)
    items = sorted({p.parent.name for p in results_dir.glob("*/summary.json")} | set(checks))
    out = []
    for item in items:
        cs = checks.get(item, [])
        word, named = _verdict_word(cs, stopped)
        figs = []
        for metric in VERDICT_METRICS:
            c = next((c for c in cs if c.get("metric") == metric), None)
            if c and c.get("measured") is not None:
                figs.append(_figure(c))
        out.append(_line(f"VERDICT {pass_name} {item}: {word}", figs, named))
    for key, cs in sorted(session.items()):
        word, named = _verdict_word(cs, stopped)
        figs = [_figure(c) for c in cs if c.get("measured") is not None and c.get("metric")]
        out.append(_line(f"VERDICT {pass_name} {key}: {word}", figs, named))
    if not items:  # nothing to judge is still a line: a review must not read silence as green
        why = "the pass was stopped at its time limit" if stopped else "no item wrote results"
        out.append(f"VERDICT {pass_name}: NOT EVALUATED ({why} before any item ended)")
    return out


def _line(head: str, figs: list[str], named: list[dict[str, Any]]) -> str:
    line = head
    if figs:
        line += "; " + "; ".join(figs)
    why = [c.get("message", c.get("metric", "?")) for c in named]
    if why:
        line += " | " + " | ".join(why)
    return line


PASSES = ("fit", "update", "check")  # the steps --passes may name, in the order they run


def step(name: str, steps: dict[str, float], since: float) -> None:
    """Record and print a step's wall time (``STEP fit: 104.9 s``): each step of a GPU night
    must end inside one device call."""
    steps[name] = round(time.monotonic() - since, 1)
    print(f"STEP {name}: {steps[name]} s", flush=True)


def fit_mal_lines(pass_name: str, items: dict[str, Any], fit_mal: float | None) -> list[str]:
    """One ``FIT-MAL`` line per EAGLE3 item of a pass: its MAL per engine start, the request
    count it sent and what chose it, against the fit-time MAL on the same prompts. The head is
    fitted to the suite's measured prompts, so a start that differs from the fit-time MAL means
    the served path or the prompts moved (e.g. a count the head was not fitted to)."""
    out = []
    for item, f in items.items():
        if f.get("method") != "eagle3":
            continue
        mals = [m for m in f.get("mal_per_start") or [] if m is not None]
        size = f.get("sizing") or {}
        if fit_mal is None or not mals:
            word = "NOT EVALUATED (no fit-time MAL)" if fit_mal is None else "NOT EVALUATED"
        elif all(abs(m - fit_mal) <= 1e-9 for m in mals):
            word = "EQUAL"
        else:
            word = "DIFFERS"
        out.append(
            f"FIT-MAL {pass_name} {item}: {word}; per start "
            f"{[round(m, 4) for m in mals]} vs fit-time {fit_mal} on "
            f"{f.get('num_requests')} requests ({size.get('source', '?')}: "
            f"suite {size.get('configured_requests', '?')})"
        )
    return out


def markdown(report: dict[str, Any]) -> str:
    lines = [f"# gpu_run {report['started']}", "", f"device: {report['device']}", ""]
    for name, p in report["passes"].items():
        lines += [f"## pass {name} (exit {p['exit_code']}, {p['seconds']} s)", ""]
        lines.append(
            "| item | tok/s | TPOT p50 ms | TTFT p50 ms | MAL | draft ms/step | verify ms/step "
            "| x native | fast path | max alloc GiB | SM MHz mean | W mean |"
        )
        lines.append("|" + "---|" * 12)
        for item, f in p["items"].items():
            nv = ((f.get("nvml") or {}).get("gpus") or {}).get("0") or {}

            def n(v: Any, fmt: str = ".1f") -> str:
                return "-" if v is None else format(v, fmt)

            fast = f.get("fast_path") or {}
            fp = "compiled" if fast.get("compiled") else "eager"
            if (fast.get("decode_loop") or {}).get("used"):
                fp += " + loop"
            draft, verify = f.get("draft_ms_per_step"), f.get("verify_ms_per_step")
            lines.append(
                f"| {item} | {n(f['output_tok_s'])} | {n(f['tpot_ms_p50'], '.2f')} "
                f"| {n(f['ttft_ms_p50'])} | {n(f['mal'], '.3f')} "
                f"| {n(draft, '.2f')} | {n(verify, '.2f')} "
                f"| {n(f.get('speedup_vs_native'), '.2f')} | {fp} "
                f"| {n(f.get('cuda_max_memory_allocated_gib'), '.2f')} "
                f"| {n((nv.get('sm_clock_mhz') or {}).get('mean'), '.0f')} "
                f"| {n((nv.get('power_w') or {}).get('mean'), '.0f')} |"
            )
        if p.get("roofline"):
            r = p["roofline"]
            lines += [
                "",
                f"roofline: {r['weight_gb']:.2f} GB of weights at {r['hbm_tb_s']} TB/s = "
                f"{r['roofline_tok_s']:.0f} tok/s; native decode p50 "
                f"{n(r['native_decode_tok_s_p50'])} tok/s = "
                f"{n((r['native_share'] or 0) * 100)}% of it",
            ]
        lines.append("")
        if p.get("verdicts"):
            lines += ["verdicts (one line per item, for the review):", ""]
            lines += [f"    {v}" for v in p["verdicts"]]
            lines.append("")
    return "\n".join(lines) + "\n"


def default_root() -> Path:
    """The suite repository: the checkout this package is imported from when it holds
    ``tests/perf``, else the working directory."""
    return ROOT if (ROOT / "tests" / "perf").is_dir() else Path.cwd()


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of ``specperf gpu-night`` (and of ``python -m specperf.testkit.gpu_night``)."""
    ap.add_argument("--out", type=Path, default=Path("gpu-run-out"), help="report folder")
    ap.add_argument(
        "--passes",
        default="update,check",
        metavar="STEP[,STEP]",
        help="comma list of fit|update|check, run in that order; the head is fitted before any "
        "pass that needs it (fit alone: only the fit)",
    )
    ap.add_argument(
        "--suite",
        type=Path,
        default=SUITE,
        help="suite file (default: the packaged h200-transformers; another must name the same "
        "models_dir, device and eagle3_head settings)",
    )
    ap.add_argument("--shapes", choices=("qwen3-8b", "tiny"), default="qwen3-8b")
    ap.add_argument("--device", default="cuda", help="cuda, or cpu for a dry run")
    ap.add_argument("--root", type=Path, default=None, help="the suite repository (tests/perf)")
    ap.add_argument("--models-dir", type=Path, default=None, help="where the configs are built")
    ap.add_argument(
        "--baselines-dir", type=Path, default=None, help="baseline files (default ROOT/baselines)"
    )
    ap.add_argument("--work", type=Path, default=None, metavar="DIR", help="results root")
    ap.add_argument(
        "--hbm-tb-s",
        type=float,
        default=None,
        help="GPU memory bandwidth for the roofline line (default: the GPU's datasheet figure, "
        "from HBM_BYTES_PER_S; none for a GPU not listed)",
    )
    ap.add_argument("--pass-timeout", type=float, default=3600.0, help="seconds per pass")
    ap.add_argument(
        "--eagle3-head",
        choices=("fitted", "random", "none"),
        default="fitted",
        help="fitted: fit (or reuse) the head for the random target; random: a random head under "
        "the fitted head's identity (a deliberate regression: the MAL gate must fail); none: no "
        "head, for passes without EAGLE3 (-- --engine transformers-loop, or --method native)",
    )
    ap.add_argument("--fit-timeout", type=float, default=900.0, help="seconds for the head fit")
    ap.add_argument(
        "--budget-s",
        type=float,
        default=None,
        metavar="SECONDS",
        help="seconds for the whole command (a device call's limit): the fit and every pass get "
        "at most what is left, less 20 s to write the report",
    )
    ap.add_argument("--fit-steps", type=int, default=None, help="training steps of the fit")
    ap.add_argument("--markdown", type=Path, default=None, help="print the tables of a run")
    ap.add_argument(
        "pytest_args", nargs="*", metavar="PYTEST_ARG", help="extra pytest arguments (after --)"
    )


def main(argv: list[str] | None = None) -> int:
    """``specperf gpu-night ARGV`` without the other subcommands' imports (``python -m
    specperf.testkit.gpu_night`` runs it on bare CUDA images): the same parser, help and error
    handling as the CLI's."""
    from specperf.cli import readable_metavars
    from specperf.errors import SpecperfError
    from specperf.testkit.commands import GPU_NIGHT

    first, _, rest = GPU_NIGHT.description.partition("\n\n")
    ap = argparse.ArgumentParser(
        prog="specperf gpu-night",
        description=textwrap.fill(first, 88) + ("\n\n" + rest if rest else ""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(ap)
    readable_metavars(ap)
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return run(args)
    except SpecperfError as exc:
        print(f"specperf gpu-night: error: {exc}", file=sys.stderr)
        return 2


def run(args: argparse.Namespace) -> int:
    """Models, head fit, passes, report (``specperf gpu-night``); the exit code is the worst
    pass's, or 1 when a fit asked for by ``--passes fit`` failed."""
    if args.markdown:
        print(markdown(json.loads(args.markdown.read_text())))
        return 0
    names = [p for p in args.passes.split(",") if p]
    unknown = sorted(set(names) - set(PASSES))
    if unknown or not names:
        raise ConfigError(
            f"--passes {args.passes}: {','.join(unknown) or 'empty'}: not one of {'|'.join(PASSES)}"
        )
    pytest_passes = [n for n in PASSES if n in names and n != "fit"]
    args.root = args.root or default_root()
    args.baselines_dir = args.baselines_dir or args.root / "baselines"
    args.out.mkdir(parents=True, exist_ok=True)
    steps: dict[str, float] = {}
    models_dir = args.models_dir or Path.home() / ".cache/specperf/models" / f"shapes-{args.shapes}"
    work = args.work or Path("/tmp") / f"specperf-gpu-run-{os.getpid()}"
    started = time.strftime("%Y-%m-%dT%H:%M:%S")
    t0 = time.monotonic()
    host = host_identity()
    print(f"HOST {json.dumps(host)}", flush=True)
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    before = baseline_contents(args.baselines_dir)
    models = build_models(models_dir, args.shapes)
    print(f"models: {models} ({time.monotonic() - t0:.1f}s)", flush=True)
    step("models", steps, t0)
    if args.budget_s:
        args.fit_timeout = min(args.fit_timeout, args.budget_s - 60 - (time.monotonic() - t0))
    if args.eagle3_head == "none":
        head: dict[str, Any] = {"skipped": "--eagle3-head none"}
        print("EAGLE3 head: none (no fit); an eagle3 item in this pass cannot start", flush=True)
    else:
        t_fit = time.monotonic()
        head = prepare_eagle3_head(args, models_dir)
        step("fit", steps, t_fit)
    import torch
    import transformers

    device = {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "cuda": torch.version.cuda,
        "gpus": [torch.cuda.get_device_name(i) for i in gpu_indices()],
    }
    # the roofline's bandwidth: given, else the (first) GPU's datasheet figure, else none
    gpu_name = (device["gpus"] or [""])[0]
    hbm = args.hbm_tb_s * 1e12 if args.hbm_tb_s else hbm_bytes_per_s(gpu_name)
    if hbm is None and device["gpus"]:
        print(f"gpu_run: no memory bandwidth known for {gpu_name!r}: no roofline (--hbm-tb-s)")
    device["hbm_tb_s"] = hbm / 1e12 if hbm else None
    passes = []
    for name in pytest_passes:
        if args.budget_s:
            args.pass_timeout = min(args.pass_timeout, args.budget_s - 20 - (time.monotonic() - t0))
        res = work / f"results-{name}"
        t_pass = time.monotonic()
        passes.append(run_pass(name, args, models_dir, res, args.out / f"pytest-{name}.log"))
        step(f"pass {name}", steps, t_pass)
    report = {
        "started": started,
        "host": host,
        "device": device,
        "models": models,
        "eagle3_head": head,
        "settings": suite_settings(args, models_dir),
        "suite": str(args.suite),
        "passes": collect(passes, hbm),
        "seconds": round(time.monotonic() - t0, 1),
        "steps": steps,
    }
    (args.out / "gpu_run.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    for f in sorted(args.baselines_dir.glob("*.json")):  # the baseline file(s) this run wrote
        if before.get(f.name) != f.read_bytes():
            report.setdefault("starts_annotated", {})[f.name] = annotate_starts(f, since, host)
            shutil.copy(f, args.out / f"baseline-{f.name}")
    (args.out / "gpu_run.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    with tarfile.open(args.out / "results.tar.gz", "w:gz") as tar:
        for p in passes:
            tar.add(p["results_dir"], arcname=Path(p["results_dir"]).name)
    print(markdown(report), flush=True)
    print(f"HOST {host['hostname']} boot {host.get('boot_id')} gpus {host.get('gpus')}")
    step("total", steps, t0)
    print("STEPS " + ", ".join(f"{k} {v:.1f} s" for k, v in steps.items()), flush=True)
    fit_mal = head.get("fit_time_mal")
    for name, p in report["passes"].items():  # last, so they end the output the call returns
        for line in fit_mal_lines(name, p["items"], fit_mal):
            print(line, flush=True)
        for v in p.get("verdicts", []):
            print(v, flush=True)
    fit_failed = "fit" in names and head.get("exit_code") not in (0, None)
    return max([p["exit_code"] for p in passes] + [1 if fit_failed else 0])


if __name__ == "__main__":
    raise SystemExit(main())

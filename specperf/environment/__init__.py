"""Where a run happened: the hardware profile (which baseline file applies), the environment
record of every summary, and an NVML sampler for NVIDIA GPUs (clocks, power, temperature,
throttle reasons, memory, foreign processes) summarised per run.

Why: a regression is only real on the same hardware in the same state. The profile keeps L40 and
L40S (or SXM and NVL) baselines apart; the sampler shows a GPU that throttled or was shared
during a run, which would otherwise read as an engine regression.

One job per module: ``names`` (slugs), ``host`` (CPU model, flags, ISA class, CPU profile),
``nvml`` (GPU inventory, MIG slices), ``record`` (``hardware_profile``, ``environment_record``,
``engine_env_record``),
``sampler`` (``GpuSampler``). Every name stays importable from ``specperf.environment``; a test
that replaces a function patches the module that calls it (``environment.host.cpu_model``).
"""

from __future__ import annotations

from specperf.environment.host import (
    _FORCED_ISA,
    ISA_CLASSES,
    boot_id,
    cpu_flags,
    cpu_model,
    cpu_profile,
    cpu_signature,
    cpu_vendor,
    isa_class,
    usable_cpus,
)
from specperf.environment.names import (
    cpu_slug,
    gpu_slug,
    slug,
)
from specperf.environment.nvml import (
    _nvml,
    _text,
    gpu_indices,
    gpu_inventory,
    mig_devices,
    visible_gpus,
)
from specperf.environment.record import (
    engine_env_record,
    environment_record,
    git_commit,
    hardware_profile,
)
from specperf.environment.sampler import (
    BENIGN_THROTTLE,
    THROTTLE_REASONS,
    GpuSampler,
    _proc_name,
    decode_throttle,
    engine_pids,
    summarize_samples,
)

__all__ = [
    "BENIGN_THROTTLE",
    "ISA_CLASSES",
    "THROTTLE_REASONS",
    "_FORCED_ISA",
    "GpuSampler",
    "_nvml",
    "_proc_name",
    "_text",
    "boot_id",
    "cpu_flags",
    "cpu_model",
    "cpu_profile",
    "cpu_signature",
    "cpu_slug",
    "cpu_vendor",
    "decode_throttle",
    "engine_env_record",
    "engine_pids",
    "environment_record",
    "git_commit",
    "gpu_indices",
    "gpu_inventory",
    "gpu_slug",
    "hardware_profile",
    "isa_class",
    "mig_devices",
    "slug",
    "summarize_samples",
    "usable_cpus",
    "visible_gpus",
]

"""Hardware profile names, environment record, and the NVML summary on synthetic samples (the
sampler itself only runs on NVIDIA GPUs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from specperf import environment as env_mod
from specperf.environment import (
    GpuSampler,
    cpu_slug,
    decode_throttle,
    environment_record,
    gpu_slug,
    hardware_profile,
    summarize_samples,
)


def gpu(name: str, index: int = 0, mig: bool = False) -> dict[str, object]:
    return {"index": index, "name": name, "uuid": f"GPU-{index}", "mig": mig, "driver": "560.1"}


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("NVIDIA L40", "nvidia-l40"),
        ("NVIDIA L40S", "nvidia-l40s"),
        ("NVIDIA H200", "nvidia-h200"),
        ("NVIDIA H100 80GB HBM3", "nvidia-h100-80gb-hbm3"),
        ("NVIDIA H100 NVL", "nvidia-h100-nvl"),
        ("NVIDIA A100-SXM4-80GB", "nvidia-a100-sxm4-80gb"),
        ("Tesla T4", "nvidia-tesla-t4"),
    ],
)
def test_gpu_slug_keeps_the_full_product_name(name: str, expected: str) -> None:
    assert gpu_slug(name) == expected


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz", "intel-xeon-platinum-8481c"),
        ("AMD EPYC 9654 96-Core Processor", "amd-epyc-9654"),
        ("AMD EPYC", "amd-epyc"),
    ],
)
def test_cpu_slug(model: str, expected: str) -> None:
    assert cpu_slug(model) == expected


def test_hardware_profile_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    assert hardware_profile(gpus=[gpu("NVIDIA L40")]) == "nvidia-l40x1"
    assert hardware_profile(gpus=[gpu("NVIDIA L40S")]) == "nvidia-l40sx1"
    assert hardware_profile(gpus=[gpu("NVIDIA H200", 0), gpu("NVIDIA H200", 1)]) == "nvidia-h200x2"
    assert hardware_profile(gpus=[gpu("NVIDIA A100-SXM4-80GB", mig=True)]) == (
        "nvidia-a100-sxm4-80gb-migx1"
    )
    assert hardware_profile("my-lab-box", gpus=[gpu("NVIDIA L40")]) == "my-lab-box"
    monkeypatch.setattr(env_mod.host, "cpu_model", lambda: "AMD EPYC 9654 96-Core Processor")
    monkeypatch.setattr(env_mod.host, "cpu_vendor", lambda: "amd")
    monkeypatch.setattr(env_mod.host, "cpu_flags", lambda: {"avx2", "avx512f", "avx512_bf16"})
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    assert hardware_profile(gpus=[], cpus=2) == "cpu-amd-epyc-9654-avx512-2c"
    monkeypatch.setattr(env_mod.host, "cpu_model", lambda: "Intel(R) Xeon(R) Platinum 8481C CPU")
    monkeypatch.setattr(env_mod.host, "cpu_vendor", lambda: "intel")
    monkeypatch.setattr(
        env_mod.host, "cpu_flags", lambda: {"avx2", "avx512f", "amx_tile", "amx_bf16"}
    )
    assert hardware_profile(gpus=[], cpus=2) == "cpu-intel-xeon-platinum-8481c-amx-2c"
    # a forced weaker kernel ISA is another numerics profile
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    assert hardware_profile(gpus=[], cpus=2) == "cpu-intel-xeon-platinum-8481c-avx2-2c"


@pytest.mark.parametrize(
    ("flags", "env", "expected"),
    [
        ({"avx2"}, {}, "avx2"),
        ({"avx2", "avx512f"}, {}, "avx512"),
        ({"avx2", "avx512f", "amx_tile"}, {}, "amx"),
        ({"sse4_2"}, {}, "base"),
        ({"avx2", "avx512f"}, {"ATEN_CPU_CAPABILITY": "default"}, "base"),
        ({"avx2", "avx512f"}, {"ONEDNN_MAX_CPU_ISA": "avx512_core_amx"}, "avx512"),
        ({"avx2"}, {"ONEDNN_MAX_CPU_ISA": "ALL"}, "avx2"),
    ],
)
def test_isa_class(flags, env, expected) -> None:
    assert env_mod.isa_class(flags, env) == expected


ZEN5_VM = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 26
model\t\t: 2
model name\t: AMD EPYC
stepping\t: 1

processor\t: 1
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 143
"""


def test_cpu_signature_names_the_generation_the_model_name_hides() -> None:
    """The VM's model name is only "AMD EPYC"; family/model/stepping of the first processor
    say which generation it is. Too little to tell (no model number) is None, not a guess."""
    assert env_mod.cpu_signature(ZEN5_VM) == "amd family 26 model 2 stepping 1"
    xeon = "vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\n"
    assert env_mod.cpu_signature(xeon) == "intel family 6 model 143"
    assert env_mod.cpu_signature("vendor_id\t: AuthenticAMD\ncpu family\t: 26\n") is None
    assert env_mod.cpu_signature("") is None


def test_environment_record_on_this_machine(tmp_path: Path) -> None:
    rec = environment_record(repo=Path(__file__).resolve().parents[3])
    assert rec["hardware_profile"].startswith("cpu-") or rec["hardware_profile"].startswith(
        "nvidia-"
    )
    assert rec["python"] and rec["cpu_model"] and rec["cpu_logical_cores"] >= 1
    assert "cpu_signature" in rec and "boot_id" in rec
    assert rec["specperf_version"]
    assert rec["suite_git"]["commit"] is None or len(rec["suite_git"]["commit"]) == 40
    assert environment_record(repo=tmp_path)["suite_git"] == {"commit": None, "dirty": None}
    assert environment_record(hardware_profile_override="x")["hardware_profile"] == "x"


def test_decode_throttle_bits() -> None:
    assert decode_throttle(0) == []
    assert decode_throttle(0x1 | 0x4 | 0x40) == ["gpu_idle", "sw_power_cap", "hw_thermal_slowdown"]


def sample(t: float, index: int, **kw: object) -> dict[str, object]:
    base: dict[str, object] = {
        "t": t,
        "index": index,
        "sm_clock_mhz": 1980,
        "mem_clock_mhz": 2619,
        "power_w": 300.0,
        "temperature_c": 60,
        "throttle_mask": 0,
        "memory_used_mib": 1000,
        "processes": [{"pid": 100, "used_mib": 900, "name": "python"}],
    }
    return {**base, **kw}


def test_summary_of_synthetic_samples() -> None:
    samples = [
        sample(0.0, 0, sm_clock_mhz=1980, power_w=200.0, throttle_mask=0x1),
        sample(0.5, 0, sm_clock_mhz=1500, power_w=400.0, temperature_c=84, throttle_mask=0x4),
        sample(1.0, 0, sm_clock_mhz=1740, power_w=300.0, memory_used_mib=5000),
        sample(
            1.5,
            0,
            throttle_mask=0x4 | 0x20,
            processes=[
                {"pid": 100, "used_mib": 900, "name": "python"},
                {"pid": 777, "used_mib": 2048, "name": "miner"},
            ],
        ),
        sample(0.0, 1, power_w=None, processes=[]),
    ]
    s = summarize_samples(samples, allowed_pids={100})
    g0 = s["gpus"]["0"]
    assert s["num_samples"] == 5 and g0["num_samples"] == 4
    assert g0["sm_clock_mhz"] == {"min": 1500.0, "mean": 1800.0, "max": 1980.0}
    assert g0["power_w"] == {"min": 200.0, "mean": 300.0, "max": 400.0}
    assert g0["temperature_c"]["max"] == 84.0 and g0["memory_used_mib_max"] == 5000.0
    assert g0["throttle_fraction"] == {
        "gpu_idle": 0.25,
        "sw_power_cap": 0.5,
        "sw_thermal_slowdown": 0.25,
    }
    assert g0["harmful_throttle"] == ["sw_power_cap", "sw_thermal_slowdown"]
    assert g0["foreign_processes"] == [{"pid": 777, "name": "miner", "mib": 2048.0}]
    assert "power_w" not in s["gpus"]["1"] and s["gpus"]["1"]["foreign_processes"] == []
    assert s["harmful_throttle"] == ["sw_power_cap", "sw_thermal_slowdown"]
    assert [p["pid"] for p in s["foreign_processes"]] == [777]
    assert any("throttled" in n for n in s["notes"]) and any("pid 777" in n for n in s["notes"])
    quiet = summarize_samples([sample(0.0, 0, throttle_mask=0x1)], allowed_pids={100})
    assert quiet["notes"] == [] and quiet["harmful_throttle"] == []


def test_sampler_without_nvml_is_inert(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(env_mod.sampler, "_nvml", lambda: None)
    with GpuSampler([0], interval_s=0.01) as sampler:
        pass
    summary = sampler.summary()
    assert summary["num_samples"] == 0
    assert any("NVML sampling unavailable" in n for n in summary["notes"])
    assert GpuSampler([]).start().summary()["notes"] == []  # CPU engine: nothing to sample


def test_sample_reads_utilisation_when_nvml_has_it() -> None:
    from types import SimpleNamespace

    nv = SimpleNamespace(
        NVML_CLOCK_SM=0,
        NVML_CLOCK_MEM=1,
        NVML_TEMPERATURE_GPU=0,
        nvmlDeviceGetPowerUsage=lambda h: 250_000,
        nvmlDeviceGetMemoryInfo=lambda h: SimpleNamespace(used=2**30),
        nvmlDeviceGetCurrentClocksThrottleReasons=lambda h: 0,
        nvmlDeviceGetComputeRunningProcesses=lambda h: [],
        nvmlDeviceGetClockInfo=lambda h, k: 1980,
        nvmlDeviceGetTemperature=lambda h, k: 40,
        nvmlDeviceGetUtilizationRates=lambda h: SimpleNamespace(gpu=87, memory=30),
    )
    s = GpuSampler._sample(nv, 1, object(), 0.5)
    assert s["gpu_util_pct"] == 87 and s["index"] == 1 and s["power_w"] == 250.0
    del nv.nvmlDeviceGetUtilizationRates  # an older NVML binding: no reading, no crash
    assert GpuSampler._sample(nv, 1, object(), 0.5)["gpu_util_pct"] is None


class _FakeNVML:
    """Two A100s: GPU 0 whole, GPU 1 in MIG mode with two 1g.10gb slices and one 3g.40gb."""

    def __init__(self) -> None:
        self.gpus = [
            {"name": "NVIDIA A100-SXM4-80GB", "uuid": "GPU-aaa", "mig": 0, "slices": []},
            {
                "name": "NVIDIA A100-SXM4-80GB",
                "uuid": "GPU-bbb",
                "mig": 1,
                "slices": [
                    ("MIG-s1", "NVIDIA A100-SXM4-80GB MIG 1g.10gb"),
                    ("MIG-s2", "NVIDIA A100-SXM4-80GB MIG 1g.10gb"),
                    ("MIG-s3", "NVIDIA A100-SXM4-80GB MIG 3g.40gb"),
                ],
            },
        ]

    def nvmlInit(self) -> None: ...

    def nvmlShutdown(self) -> None: ...

    def nvmlSystemGetDriverVersion(self) -> str:
        return "560.1"

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i: int):
        return ("gpu", i)

    def nvmlDeviceGetMigMode(self, h):
        return (self.gpus[h[1]]["mig"], self.gpus[h[1]]["mig"])

    def nvmlDeviceGetMaxMigDeviceCount(self, h) -> int:
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h, j):
        if j >= len(self.gpus[h[1]]["slices"]):
            raise RuntimeError("not found")
        return ("mig", h[1], j)

    def nvmlDeviceGetName(self, h) -> str:
        if h[0] == "mig":
            return self.gpus[h[1]]["slices"][h[2]][1]
        return self.gpus[h[1]]["name"]

    def nvmlDeviceGetUUID(self, h) -> str:
        if h[0] == "mig":
            return self.gpus[h[1]]["slices"][h[2]][0]
        return self.gpus[h[1]]["uuid"]

    def nvmlDeviceGetMemoryInfo(self, h):
        return type("M", (), {"total": 80 * 2**30})()


def test_mig_uuids_resolve_to_their_slice_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _FakeNVML()
    monkeypatch.setattr(env_mod.nvml, "_nvml", lambda: fake)
    assert env_mod.gpu_indices(["MIG-s1", "GPU-aaa", "1"]) == [1, 0, 1]
    rows = env_mod.visible_gpus(["MIG-s1"])
    assert rows[0]["mig_profile"] == "1g.10gb" and rows[0]["uuid"] == "MIG-s1"
    assert hardware_profile(gpus=rows) == "nvidia-a100-sxm4-80gb-mig-1g.10gbx1"
    # a bigger slice of the same GPU is another profile (other speed)
    big = env_mod.visible_gpus(["MIG-s3"])
    assert hardware_profile(gpus=big) == "nvidia-a100-sxm4-80gb-mig-3g.40gbx1"
    assert hardware_profile(gpus=env_mod.visible_gpus(["GPU-aaa"])) == "nvidia-a100-sxm4-80gbx1"
    assert env_mod.visible_gpus(["MIG-unknown"]) == []

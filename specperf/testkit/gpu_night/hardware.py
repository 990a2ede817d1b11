"""The GPU night's view of the machine: the GPUs' datasheet memory bandwidth (the roofline), which
GPUs torch sees, and which host this is."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path
from typing import Any

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


def gpu_indices() -> list[int]:
    try:
        import torch

        return list(range(torch.cuda.device_count()))
    except Exception:
        return []

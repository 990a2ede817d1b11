"""Nested mappings as dotted keys (``server_shape.max_model_len``): the one flattening that
fingerprint diffs (specperf.baselines) and the report's environment tables share, so a field
is named the same way in a "stale baseline" line and in the report."""

from __future__ import annotations

from typing import Any


def flatten(
    d: Any, prefix: str = "", *, index_lists: bool = False, skip: tuple[str, ...] = ()
) -> dict[str, Any]:
    """``{"a": {"b": 1}}`` → ``{"a.b": 1}``; leaves keep their values. ``index_lists``: a
    non-empty list of mappings is flattened by index (``gpus.0.name``), other lists are
    leaves. ``skip``: top-level keys left out."""
    if isinstance(d, dict):
        out: dict[str, Any] = {}
        for k, v in d.items():
            if not prefix and k in skip:
                continue
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k), index_lists=index_lists))
        return out
    if index_lists and isinstance(d, list) and d and all(isinstance(x, dict) for x in d):
        out = {}
        for i, v in enumerate(d):
            out.update(flatten(v, f"{prefix}.{i}" if prefix else str(i), index_lists=True))
        return out
    return {prefix: d}


def get_path(d: Any, *path: str) -> Any:
    """``d[path[0]][path[1]]...``, None as soon as a step is missing or not a mapping."""
    for k in path:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


__all__ = ["flatten", "get_path"]

"""Prompt metadata the results files do not carry (language, twin id, estimated length),
looked up in the prompt sets themselves through :mod:`specperf.datasets`.

Results name their dataset; when that set can be loaded here (a committed fixture, or a
Spec-Bench copy), its items give each prompt id its language and twin. Sets that cannot be
loaded (a user path on another machine) simply contribute nothing: the report then falls back
to what the ids say (``zh-…``/``en-…``) and to the server's prompt token counts.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from specperf.errors import ConfigError


@dataclass(frozen=True)
class PromptMeta:
    lang: str
    twin: str | None
    length_bucket: str


def prompt_meta(datasets: Iterable[str]) -> dict[tuple[str, str], PromptMeta]:
    """(dataset, prompt id) → metadata for every loadable dataset among ``datasets``."""
    try:
        from specperf import datasets as ds
    except ImportError:  # the datasets module is optional for reading results
        return {}
    out: dict[tuple[str, str], PromptMeta] = {}
    for name in sorted(set(datasets)):
        try:
            data = ds.load_dataset(name, "full")
        except (ConfigError, OSError, ValueError):
            continue
        for item in data.items:
            out[(name, item.id)] = PromptMeta(item.lang, item.twin, ds.length_bucket(item))
    return out


def bucket_labels() -> list[str]:
    """Length-bucket labels in order (the datasets module's table)."""
    from specperf.datasets import LENGTH_BUCKETS

    return [label for _, label in LENGTH_BUCKETS]


def tokens_bucket(tokens: float | int | None) -> str | None:
    """The bucket of a real prompt token count (same table as the datasets' estimate)."""
    from specperf.datasets import LENGTH_BUCKETS

    if tokens is None or tokens != tokens:  # None or NaN
        return None
    return next(label for bound, label in LENGTH_BUCKETS if float(tokens) < bound)

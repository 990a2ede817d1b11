"""Model sources: the code that resolves model references of a scheme the product does not
build itself (``tiny:qwen3``, the test models of specperf's testkit).

A source is registered under its scheme (the text before the ``:``) explicitly with
:func:`register`, or by a packaging entry point of the group :data:`ENTRY_POINT_GROUP` (name =
the scheme, object = a :class:`ModelSource`), loaded on the first reference of that scheme. The
product imports no source's code: specperf declares the testkit's ``tiny`` source in
pyproject.toml's ``[project.entry-points]``, which exist once specperf is installed.
"""

from __future__ import annotations

import functools
import importlib.metadata
import re
from pathlib import Path
from typing import Protocol, runtime_checkable

from specperf.errors import ConfigError

ENTRY_POINT_GROUP = "specperf.model_sources"
# schemes the suites use whether or not a source is installed (a clear error, never a path)
RESERVED = ("tiny",)
_SCHEME = re.compile(r"([a-z][a-z0-9_-]+):(?!//)")


@runtime_checkable
class ModelSource(Protocol):
    """Resolves the references of one scheme; both methods raise ConfigError on a bad name."""

    def resolve(self, ref: str) -> Path:
        """The local directory ``ref`` names, built on first use."""
        ...

    def identity(self, ref: str) -> str:
        """What ``ref`` is, for fingerprints: the same on every machine, never a path."""
        ...


_registered: dict[str, ModelSource] = {}


def register(scheme: str, source: ModelSource) -> None:
    """Serve ``<scheme>:`` references from ``source`` (before any entry point of that name)."""
    if not isinstance(source, ModelSource):
        raise TypeError(f"model source {scheme!r}: {source!r} has no resolve()/identity()")
    _registered[scheme] = source


def unregister(scheme: str) -> None:
    _registered.pop(scheme, None)


@functools.cache
def _entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    return {ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}


def refresh() -> None:
    """Read the installed entry points again (after an install, or a change of sys.path)."""
    _entry_points.cache_clear()


def scheme_of(ref: str | None) -> str | None:
    """The scheme of a source reference (``tiny:qwen3`` → ``tiny``); None for a path or hub id."""
    m = _SCHEME.match(ref or "")
    if m is None:
        return None
    scheme = m.group(1)
    known = scheme in _registered or scheme in RESERVED or scheme in _entry_points()
    return scheme if known else None


def source_for(ref: str) -> ModelSource:
    """The source that serves ``ref``; ConfigError naming ``ref`` when none is installed."""
    scheme = scheme_of(ref)
    if scheme is None:
        raise ConfigError(f"{ref}: not a model source reference (<scheme>:<name>)")
    if scheme not in _registered:
        ep = _entry_points().get(scheme)
        if ep is None:
            raise ConfigError(
                f"{ref}: no model source for '{scheme}:' names is installed (specperf's "
                f"testkit provides it through the {ENTRY_POINT_GROUP!r} entry point): "
                "run `pip install -e .` in the specperf checkout, or use a model path"
            )
        register(scheme, ep.load())
    return _registered[scheme]


def resolve(ref: str) -> Path:
    """The local directory of a source reference (``tiny:qwen3`` → the built test model)."""
    return source_for(ref).resolve(ref)


def identity(ref: str) -> str:
    """The fingerprint identity of a source reference (``tiny:qwen3@<recipe digest>``)."""
    return source_for(ref).identity(ref)


__all__ = [
    "ENTRY_POINT_GROUP",
    "ModelSource",
    "identity",
    "refresh",
    "register",
    "resolve",
    "scheme_of",
    "source_for",
    "unregister",
]

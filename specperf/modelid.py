"""What a model IS, independent of where it lies: the identity that goes into fingerprints.

Why: a baseline fingerprint that holds ``/models/Qwen3-8B`` is stale on every machine that keeps
the same checkpoint somewhere else (the README's ``--setting qwen3_8b=/models/Qwen3-8B`` made every
committed L40 entry stale). A fingerprint holds instead, in this order of preference:

* a **declared revision** from the suite (``revision = "Qwen/Qwen3-8B@<sha>"``, or a model id):
  what the suite says the checkpoint is, wherever it lies;
* what a model source says for its references (``specperf.model_sources``): the test models'
  ``tiny:<name>@<recipe digest>``, never a hash of weights that seeded init and fitting make
  differ in low bits between CPU instruction sets;
* ``content:<digest>`` of a local directory: config/tokenizer files hashed whole, weight files by
  their size, their safetensors header (names, dtypes, shapes, offsets) and 16 evenly spaced
  64 KiB samples of their bytes — cheap on a 70 GB checkpoint, yet a fine-tune (same shapes,
  other values) changes it. Two copies of one checkpoint on two paths give one digest;
* a **hub id** (``org/name``) as it is, when no such local directory exists;
* ``name:<last path component>`` when a path cannot be read here (e.g. only inside a container):
  no directory in it, but no content either — declare a ``revision`` to be exact.
"""

from __future__ import annotations

import functools
import hashlib
import re
import struct
from pathlib import Path

from specperf import model_sources

# Hashed whole up to this size (tokenizer.json of a 150k vocabulary is ~11 MB); larger: sampled.
WHOLE_LIMIT = 64 * 1024 * 1024
SAMPLES = 16
SAMPLE_BYTES = 64 * 1024
# Not part of what a server loads, or written with timings by our own builders.
IGNORED_NAMES = {".gitattributes", "manifest.json", "fit.json"}
IGNORED_SUFFIXES = (".md", ".png", ".jpg", ".jpeg", ".gif", ".svg", ".lock")
IGNORED_PREFIXES = (".", "LICENSE", "NOTICE", "README")
HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*(@[A-Za-z0-9_.-]+)?")


def model_identity(ref: str | None, revision: str | None = None) -> str | None:
    """The identity of a model reference (see the module docstring); None stays None."""
    if revision:
        return revision
    if ref is None:
        return None
    if model_sources.scheme_of(ref):
        return model_sources.identity(ref)
    path = Path(ref).expanduser()
    if path.is_dir():
        return f"content:{dir_digest(path)}"
    if path.is_file():
        return f"content:{_file_digest(path.resolve(), *_stat(path))}"
    if HUB_ID.fullmatch(ref) and not ref.startswith(("/", ".", "~")):
        return ref
    return f"name:{path.name or ref}"


def hashed_files(path: Path) -> list[Path]:
    """The files of a checkpoint directory that decide what a server loads (top level only:
    servers read config, tokenizer and weights from there; links are followed, as in a hub
    cache snapshot)."""
    out = []
    for p in sorted(Path(path).iterdir()):
        name = p.name
        if name in IGNORED_NAMES or name.startswith(IGNORED_PREFIXES):
            continue
        if name.lower().endswith(IGNORED_SUFFIXES) or not p.is_file():
            continue
        out.append(p)
    return out


def dir_digest(path: Path) -> str:
    """Content digest of a checkpoint directory (16 hex digits), memoised per (file, size,
    mtime) so one session hashes a directory once."""
    files = hashed_files(path)
    h = hashlib.sha256()
    for p in files:
        size, mtime = _stat(p)
        h.update(f"{p.name}\0{_file_digest(p.resolve(), size, mtime)}\n".encode())
    return h.hexdigest()[:16]


def _stat(p: Path) -> tuple[int, int]:
    st = p.stat()
    return st.st_size, st.st_mtime_ns


@functools.lru_cache(maxsize=4096)
def _file_digest(path: Path, size: int, mtime_ns: int) -> str:
    """sha256 of a small file; of size + safetensors header + sampled bytes of a large one.
    ``mtime_ns`` is only part of the memo key, never of the digest."""
    del mtime_ns
    h = hashlib.sha256()
    with path.open("rb") as fh:
        if size <= WHOLE_LIMIT:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
            return "sha256:" + h.hexdigest()
        h.update(f"size={size}\n".encode())
        if path.suffix == ".safetensors":
            (n,) = struct.unpack("<Q", fh.read(8))
            if n < size:
                h.update(fh.read(n))
        for i in range(SAMPLES):
            fh.seek(max(0, size - SAMPLE_BYTES) * i // (SAMPLES - 1))
            h.update(fh.read(SAMPLE_BYTES))
    return "sampled:" + h.hexdigest()


def is_path_like(value: str) -> bool:
    """A value that names a place on this machine (kept out of fingerprints)."""
    return value.startswith(("/", "~", "./", "../")) or bool(re.match(r"[A-Za-z]:\\", value))


def portable(value: object) -> object:
    """A server flag as a fingerprint holds it: paths → ``<path>``."""
    if isinstance(value, str) and is_path_like(value):
        return "<path>"
    if isinstance(value, str) and "=" in value:  # --flag=/some/path
        flag, _, rest = value.partition("=")
        if is_path_like(rest):
            return f"{flag}=<path>"
    return value


__all__ = [
    "dir_digest",
    "hashed_files",
    "is_path_like",
    "model_identity",
    "portable",
]

"""The one home of file helpers every stage shares: atomic writes, strict JSON, JSON lines read
and appended under a lock.

Why one module: results, baselines, history and reports are read by people and by later runs
while other processes (xdist workers, a crashed run) may be writing them. A reader must see an
old or a new file, never half of one (``write_text_atomic``), an appended line is written whole
under a lock (``append_jsonl``), and a reader tolerates exactly the damage a crash can leave —
a torn last line — and reports anything else as one line naming file and line (``read_jsonl``).
It imports nothing of specperf but the error type, so any layer may use it.
"""

from __future__ import annotations

import json
import math
import os
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from specperf.errors import ConfigError


# --------------------------------------------------------------------------- writing
def clean_json(obj: Any) -> Any:
    """NaN/inf become null so every file is strict JSON that any reader accepts."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): clean_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean_json(v) for v in obj]
    return obj


def write_text_atomic(path: Path | str, text: str) -> None:
    """Write ``text`` to ``path`` via a temp file in the same directory and os.replace: a
    reader sees the old or the new file, never a partial one. The file keeps its mode, and a
    new one gets the umask's (mkstemp's 0600 would make a shared baselines folder unreadable
    to the rest of a team after one ``--update-baselines``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError:
        mode = 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    """The process's umask (reading it means setting it; set straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_json_atomic(path: Path | str, obj: Any) -> None:
    """Write strict, indented JSON via a temporary file and ``os.replace``."""
    text = json.dumps(clean_json(obj), indent=2, sort_keys=False, allow_nan=False)
    write_text_atomic(Path(path), text + "\n")


def runtime_dir() -> Path:
    """Where this host keeps runtime files — engine pidfiles, cross-worker locks
    (``SPECPERF_RUNTIME_DIR`` or ~/.cache/specperf/run)."""
    return Path(
        os.environ.get("SPECPERF_RUNTIME_DIR") or Path.home() / ".cache" / "specperf" / "run"
    ).expanduser()


def lock_path(path: Path) -> Path:
    """Locks of results files live in ``<dir>/.locks/`` so the directory stays readable."""
    folder = path.parent / ".locks"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{path.name}.lock"


def append_lines(path: Path, text: str) -> None:
    """Append ``text`` (whole lines) under the file's lock: several workers share the file."""
    from filelock import FileLock

    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(lock_path(path)), timeout=60), path.open("a", encoding="utf-8") as fh:
        fh.write(text)


def append_jsonl(path: Path, row: Mapping[str, Any]) -> None:
    """Append one JSON line under a lock (several workers share the file)."""
    append_lines(path, json.dumps(row, sort_keys=True, default=str) + "\n")


# --------------------------------------------------------------------------- reading
def read_jsonl_numbered(
    path: Path | str, *, torn_tail: bool = True, skip_bad: bool = False
) -> list[tuple[int, Any]]:
    """(line number, value) for each non-blank line of a JSON-lines file.

    ``torn_tail``: a bad LAST line is skipped (a crash while appending leaves one); any other
    bad line is a ConfigError ``<file>:<line>: invalid JSON (<why>)``. ``skip_bad``: every bad
    line is skipped (a reader that must never stop, e.g. a guard over a crashed item's
    requests). A file that cannot be read is a ConfigError ``<file>: cannot read (<why>)``.
    """
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        why = getattr(exc, "strerror", None) or exc
        raise ConfigError(f"{path}: cannot read ({why})") from None
    rows: list[tuple[int, Any]] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rows.append((n, json.loads(line)))
        except json.JSONDecodeError as exc:
            if skip_bad or (torn_tail and n == len(lines)):
                continue
            raise ConfigError(f"{path}:{n}: invalid JSON ({exc.msg})") from None
    return rows


def read_jsonl(path: Path | str, *, torn_tail: bool = True, skip_bad: bool = False) -> list[Any]:
    """The values of a JSON-lines file (see ``read_jsonl_numbered`` for what is tolerated)."""
    return [v for _, v in read_jsonl_numbered(path, torn_tail=torn_tail, skip_bad=skip_bad)]


__all__ = [
    "append_jsonl",
    "append_lines",
    "clean_json",
    "lock_path",
    "read_jsonl",
    "read_jsonl_numbered",
    "runtime_dir",
    "write_json_atomic",
    "write_text_atomic",
]

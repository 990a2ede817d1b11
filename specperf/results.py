"""Results on disk: one directory per run with ``summary.json`` and ``requests.jsonl``.

Nothing measured may be lost on a crash: each request is appended to ``requests.jsonl`` the
moment it finishes (``RequestLog``); at the end ``write_run`` replaces both files atomically
(temporary file + ``os.replace``) with the final, send-ordered content.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from specperf.errors import ConfigError
from specperf.fileio import clean_json, read_jsonl_numbered, write_json_atomic, write_text_atomic
from specperf.schemas import RequestRecord
from specperf.summary_schema import check_summary

SUMMARY_NAME = "summary.json"
REQUESTS_NAME = "requests.jsonl"


def _record_line(record: RequestRecord | dict[str, Any]) -> str:
    data = record.to_json() if isinstance(record, RequestRecord) else record
    return json.dumps(clean_json(data), ensure_ascii=False, allow_nan=False) + "\n"


class RequestLog:
    """Appends finished requests to ``requests.jsonl`` as they complete (flushed per line)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh: IO[str] | None = self.path.open("w", encoding="utf-8")

    def append(self, record: RequestRecord) -> None:
        if self._fh is None:
            return
        self._fh.write(_record_line(record))
        self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def __enter__(self) -> RequestLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_requests(path: Path, records: Iterable[RequestRecord | dict[str, Any]]) -> None:
    write_text_atomic(Path(path), "".join(_record_line(r) for r in records))


def write_run(out_dir: Path, summary: dict[str, Any], records: list[RequestRecord]) -> None:
    """Final ``requests.jsonl`` (send order) and ``summary.json``, each replaced atomically."""
    out_dir = Path(out_dir)
    write_requests(out_dir / REQUESTS_NAME, records)
    write_json_atomic(out_dir / SUMMARY_NAME, summary)


def read_summary(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A run summary from its file or from the run directory that holds ``summary.json``."""
    p = Path(path)
    if p.is_dir():
        p = p / SUMMARY_NAME
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{p}: run summary not found") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{p}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: a run summary must be a JSON object")
    return check_summary(data, str(p))


def read_requests(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Per-request records (dicts) from ``requests.jsonl`` or its run directory."""
    p = Path(path)
    if p.is_dir():
        p = p / REQUESTS_NAME
    if not p.is_file():
        raise ConfigError(f"{p}: per-request records not found")
    return [row for _, row in read_jsonl_numbered(p, torn_tail=False)]

"""Typed access to one TOML table with errors naming file and dotted key (``_Reader``), and the
small parsers several tables share (server shape, free-form options, known issues, sweeps)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from specperf.config.matrix import SERVER_KEYS
from specperf.config.model import KnownIssue
from specperf.errors import ConfigError


class _Reader:
    """Typed access to one TOML table with errors naming file and dotted key."""

    def __init__(
        self, source: str, table: Mapping[str, Any], where: str, settings: Mapping[str, str]
    ):
        self.source = source
        self.table = table
        self.where = where
        self.settings = settings
        self.used: set[str] = set()

    def err(self, key: str | None, problem: str) -> ConfigError:
        path = f"{self.where}.{key}" if key and self.where else (key or self.where or "<top>")
        return ConfigError(f"{self.source}: {path}: {problem}")

    def sub(self, key: str, required: bool = False) -> _Reader:
        value = self.get(key, dict, required=required, default={})
        where = f"{self.where}.{key}" if self.where else key
        return _Reader(self.source, value, where, self.settings)

    def get(self, key: str, typ: Any, *, required: bool = False, default: Any = None) -> Any:
        self.used.add(key)
        if key not in self.table:
            if required:
                raise self.err(key, "missing (required)")
            return default
        value = self.table[key]
        if typ is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        ok = isinstance(value, typ) and not (typ in (int, float) and isinstance(value, bool))
        if not ok:
            raise self.err(key, f"expected {_type_name(typ)}, got {type(value).__name__} {value!r}")
        if isinstance(value, str):
            value = self.expand(key, value)
        return value

    def strs(self, key: str, default: tuple[str, ...] = ()) -> tuple[str, ...]:
        value = self.get(key, (list, str), default=None)
        if value is None:
            return default
        if isinstance(value, str):
            return (value,)
        for v in value:
            if not isinstance(v, str):
                raise self.err(key, f"expected a list of strings, found {v!r}")
        return tuple(self.expand(key, v) for v in value)

    def ints(self, key: str, default: tuple[int, ...] = ()) -> tuple[int, ...]:
        value = self.get(key, (list, int), default=None)
        if value is None:
            return default
        values = [value] if isinstance(value, int) else value
        for v in values:
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise self.err(key, f"expected positive integers, found {v!r}")
        return tuple(values)

    def choice(self, key: str, choices: Iterable[str], default: str | None = None) -> str | None:
        value = self.get(key, str, default=default)
        choices = tuple(choices)
        if value is not None and value not in choices:
            raise self.err(key, f"{value!r} is not one of {', '.join(choices)}")
        return value

    def expand(self, key: str, text: str) -> str:
        def repl(m: re.Match[str]) -> str:
            name = m.group(1)
            if name not in self.settings:
                raise self.err(key, f"unknown setting ${{{name}}} (define it under [settings])")
            return self.settings[name]

        return re.sub(r"\$\{([A-Za-z0-9_.-]+)\}", repl, text)

    def check_unknown(self, allowed: Iterable[str]) -> None:
        allowed = set(allowed) | self.used
        for key in self.table:
            if key not in allowed:
                raise self.err(key, f"unknown key (allowed: {', '.join(sorted(allowed))})")


def _type_name(typ: Any) -> str:
    if isinstance(typ, tuple):
        return " or ".join(_type_name(t) for t in typ)
    return {
        str: "a string",
        int: "an integer",
        float: "a number",
        bool: "true/false",
        dict: "a table",
        list: "a list",
    }.get(typ, str(typ))


def _server(r: _Reader) -> tuple[tuple[str, Any], ...]:
    out = {}
    for key, typ in SERVER_KEYS.items():
        value = r.get(key, typ)
        if value is not None:
            out[key] = value
    return tuple(sorted(out.items()))


def _pairs(r: _Reader, key: str) -> tuple[tuple[str, Any], ...]:
    """A free-form table (engine/method options) with ${settings} expanded in its strings."""
    table = r.get(key, dict, default={})

    def expand(k: str, v: Any) -> Any:
        if isinstance(v, str):
            return r.expand(f"{key}.{k}", v)
        if isinstance(v, list):
            return [expand(k, x) for x in v]
        if isinstance(v, dict):
            return {a: expand(f"{k}.{a}", b) for a, b in v.items()}
        return v

    return tuple(sorted((str(k), _freeze(expand(str(k), v))) for k, v in table.items()))


def _freeze(v: Any) -> Any:
    """Hashable form (EngineSpec is frozen and hashed by the engine pool)."""
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _freeze(x)) for k, x in v.items()))
    return v


def _known_issue(r: _Reader) -> KnownIssue:
    issue = KnownIssue(
        reason=r.get("reason", str, required=True),
        link=r.get("link", str, required=True),
        until_engine_version=r.get("until_engine_version", str),
        until_date=r.get("until_date", str),
        match=tuple(sorted(r.get("match", dict, default={}).items())),
        metrics=r.strs("metrics"),
    )
    if not issue.until_engine_version and not issue.until_date:
        raise r.err(None, "a known issue needs an expiry: until_engine_version or until_date")
    if issue.until_date and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", issue.until_date):
        raise r.err("until_date", f"expected YYYY-MM-DD, got {issue.until_date!r}")
    _check_match(r, issue.match)
    r.check_unknown([])
    return issue


MATCH_FIELDS = ("model", "engine", "method", "dataset", "concurrency", "sampling")


def _check_match(r: _Reader, match: Iterable[tuple[str, Any]]) -> None:
    for name, _ in match:
        if name not in MATCH_FIELDS:
            raise r.err("match", f"unknown field {name!r} (allowed: {', '.join(MATCH_FIELDS)})")


def _parse_sweep(r: _Reader, default: tuple[tuple[int, int], ...] | None) -> Any:
    conc = r.ints("concurrency")
    reqs = r.ints("requests")
    if not conc and not reqs:
        return default
    if not conc:
        raise r.err("concurrency", "missing (requests given without concurrency)")
    if not reqs:
        raise r.err("requests", "missing (one request count per concurrency)")
    if len(reqs) == 1:
        reqs = reqs * len(conc)
    if len(reqs) != len(conc):
        raise r.err("requests", f"{len(reqs)} counts for {len(conc)} concurrencies")
    for c, n in zip(conc, reqs, strict=True):
        if n < c:
            raise r.err("requests", f"{n} requests is fewer than concurrency {c}")
    return tuple(zip(conc, reqs, strict=True))

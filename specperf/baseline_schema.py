"""The baseline file's schema (docs/baselines.md) as pydantic models.

``specperf.baselines.parse_baselines`` validates a file against ``BaselineFileSchema`` and builds
its records from the tables; a bad value is a ``ConfigError`` naming the file, the dotted key
(``entries.<key>.metrics.<name>.tolerance``) and the problem (``specperf.validation``).
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import Field, field_validator, model_validator

from specperf.config import ItemKey, KnownIssue
from specperf.errors import ConfigError
from specperf.validation import Number, Table, one_of, problem, says

SCHEMA = 1
SOURCES = ("measured", "seed-note")
TOLERANCE_SOURCES = ("suite", "measured", "seed-note")


class KnownIssueSchema(Table):
    """An entry's quarantine (its scope is the entry; other keys are ignored)."""

    unknown_key: ClassVar[str | None] = None
    reason: Any = None
    link: Any = None
    until_engine_version: str | None = None
    until_date: str | None = None
    metrics: list[str] = []

    @model_validator(mode="after")
    def _complete(self) -> KnownIssueSchema:
        for k in ("reason", "link"):
            if not isinstance(getattr(self, k), str) or not getattr(self, k):
                raise problem("missing", k)
        if not self.until_engine_version and not self.until_date:
            raise problem("needs an expiry: until_engine_version or until_date")
        return self

    def issue(self) -> KnownIssue:
        return KnownIssue.of(self)


class MetricSchema(Table):
    """One stored metric: value, direction, tolerance and where they come from."""

    unknown_key: ClassVar[str | None] = "unknown key"
    value: Number
    direction: Annotated[str, says("must be higher, lower or equal")]
    tolerance: Annotated[float, says("expected a relative tolerance such as 0.05, got {got}")]
    tolerance_source: Annotated[
        str,
        says(f"must be one of {', '.join(TOLERANCE_SOURCES)}"),
        one_of(TOLERANCE_SOURCES, f"must be one of {', '.join(TOLERANCE_SOURCES)}"),
    ] = "suite"
    tolerance_note: str | None = None
    hardware_profile: str | None = None
    samples: list[Any] | None = None  # old files: per repeat
    interval: list[Any] | None = None
    note: str | None = None
    starts: list[Any] | None = None  # one {value, host, date, engine_version} per engine start
    report_only: str | None = None

    missing: ClassVar[dict[str, str]] = {
        "value": "expected a number, got None",
        "direction": "must be higher, lower or equal",
        "tolerance": "expected a relative tolerance such as 0.05, got None",
    }

    @field_validator("direction")
    @classmethod
    def _direction(cls, v: str) -> str:
        if v not in ("higher", "lower", "equal"):
            raise problem("must be higher, lower or equal")
        return v

    @field_validator("tolerance")
    @classmethod
    def _relative(cls, tol: float) -> float:
        if not 0 <= tol < 10:
            raise problem(f"expected a relative tolerance such as 0.05, got {tol!r}")
        return tol

    @field_validator("starts")
    @classmethod
    def _starts(cls, raw: list[Any] | None) -> list[Any] | None:
        if raw is None:
            return None
        if not raw:
            raise problem("expected a non-empty list of {value, host, date, engine_version}")
        for i, st in enumerate(raw):
            if not isinstance(st, dict):
                raise problem("expected an object with at least 'value'", i)
            v = st.get("value")
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                raise problem(f"expected a number, got {v!r}", i, "value")
        return [dict(st) for st in raw]

    @model_validator(mode="after")
    def _noted(self) -> MetricSchema:
        if self.tolerance_source == "measured" and not self.tolerance_note:
            raise problem("a measured tolerance must say how it was measured", "tolerance_note")
        return self


MetricItem = Annotated[
    MetricSchema, says("expected an object with at least value/direction/tolerance")
]


class EntrySchema(Table):
    """One item's entry: its metrics, where they come from, and what makes runs comparable."""

    unknown_key: ClassVar[str | None] = "unknown key"
    key: Any = None  # written for readers; the entry's name is the key
    metrics: dict[str, MetricItem] | None = None
    provenance: dict[str, Any] | None = None
    fingerprint: dict[str, Any] | None = None
    fingerprint_digest: Any = None  # written for readers; recomputed from the fingerprint
    known_issue: (
        Annotated[KnownIssueSchema, says("expected an object with reason, link and an expiry")]
        | None
    ) = None

    @field_validator("metrics", mode="wrap")
    @classmethod
    def _metrics(cls, v: Any, handler: Any) -> Any:
        if not isinstance(v, dict) or not v:
            raise problem("missing or empty")
        return handler(v)

    @field_validator("provenance", mode="wrap")
    @classmethod
    def _provenance(cls, prov: Any, handler: Any) -> Any:
        if not isinstance(prov, dict):
            raise problem("missing (engine version, date, source, ...)")
        if prov.get("source") not in SOURCES:
            raise problem(f"must be one of {', '.join(SOURCES)}", "source")
        if prov.get("source") == "seed-note" and not prov.get("how_measured"):
            raise problem("seed-note figures must say how they were measured", "how_measured")
        return handler(prov)

    @field_validator("fingerprint", mode="wrap")
    @classmethod
    def _fingerprint(cls, fp: Any, handler: Any) -> Any:
        if not isinstance(fp, dict):
            raise problem("missing")
        return handler(fp)

    @model_validator(mode="before")
    @classmethod
    def _required(cls, data: Any) -> Any:
        # metrics, provenance and fingerprint are required, with their own words when absent
        if isinstance(data, dict):
            return {"metrics": None, "provenance": None, "fingerprint": None, **data}
        return data


def _keys(entries: Any) -> Any:
    for key in entries if isinstance(entries, dict) else ():
        try:
            ItemKey.parse(key)
        except ConfigError as exc:
            raise problem(str(exc), key) from None
    return entries


class BaselineFileSchema(Table):
    """A whole baseline file (one hardware profile)."""

    unknown_key: ClassVar[str | None] = "unknown top-level key"
    schema_: Any = Field(SCHEMA, alias="schema")
    hardware_profile: str | None = None
    description: str = ""
    entries: Annotated[
        dict[
            str,
            Annotated[EntrySchema, says("expected an object")],
        ],
        says("expected an object keyed model/engine/method/dataset/c<N>/sampling"),
    ] = {}
    rules: Annotated[list[Any], says("expected a list of rule objects")] = []

    @field_validator("schema_")
    @classmethod
    def _schema(cls, schema: Any) -> Any:
        if schema != SCHEMA:
            raise problem(f"unsupported schema {schema!r} (this specperf reads {SCHEMA})")
        return schema

    _entry_keys = field_validator("entries", mode="before")(_keys)


__all__ = [
    "SCHEMA",
    "SOURCES",
    "TOLERANCE_SOURCES",
    "BaselineFileSchema",
    "EntrySchema",
    "KnownIssueSchema",
    "MetricSchema",
]

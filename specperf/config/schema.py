"""The suite file's schema: one pydantic model per TOML table (docs/suite.md).

Types, defaults and every rule of the format live here; ``specperf.config.loading`` validates a
file against ``SuiteFile`` (with the ``[settings]`` as context, so ``${name}`` in a string is
expanded) and turns the tables into the domain records of ``specperf.config.model``. A bad value
is a ``ConfigError`` naming the file, the dotted key and the problem
(``specperf.validation``). The ``[[rules]]`` and ``[[known_issues]]`` tables are in
``specperf.config.rules``.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar

from pydantic import (
    PlainValidator,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from specperf.config.matrix import SERVER_KEYS
from specperf.config.model import DEFAULT_METRICS, METHODS
from specperf.config.rules import KnownIssueTable, RuleItem, _unique_ids, engine_names_of
from specperf.schemas import NATIVE, WorkloadSpec
from specperf.validation import (
    Ints,
    Strs,
    Table,
    Text,
    expand,
    expected,
    one_of,
    problem,
    settings_of,
    typed,
)

Tier = Annotated[Text, one_of(("smoke", "full"))]


def _freeze(v: Any) -> Any:
    """Hashable form (EngineSpec is frozen and hashed by the engine pool)."""
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _freeze(x)) for k, x in v.items()))
    return v


def _pairs(value: Any, info: ValidationInfo) -> tuple[tuple[str, Any], ...]:
    """A free-form table (engine/method options) with ${settings} expanded in its strings."""
    if not isinstance(value, dict):
        raise problem(expected("a table", value))
    settings = settings_of(info) or {}

    def exp(path: tuple[str, ...], v: Any) -> Any:
        if isinstance(v, str):
            try:
                return expand(v, settings)
            except PydanticCustomError as exc:  # an unknown setting: name the key it is in
                raise problem(str((exc.context or {})["problem"]), *path) from None
        if isinstance(v, list):
            return [exp(path, x) for x in v]
        if isinstance(v, dict):
            return {a: exp((*path, a), b) for a, b in v.items()}
        return v

    return tuple(sorted((str(k), _freeze(exp((str(k),), v))) for k, v in value.items()))


# A free-form table → sorted, hashable (key, value) pairs.
Pairs = Annotated[tuple[tuple[str, Any], ...], PlainValidator(_pairs)]


def _revision(value: str) -> str | None:
    """A declared model identity: a model id or ``id@sha``; "" (e.g. from a setting) means none
    declared, so the fingerprint holds the content digest of the path."""
    if not value:
        return None
    if any(c.isspace() for c in value) or value.startswith(("/", "~", ".")):
        raise problem(f"{value!r}: expected a model id or id@revision, not a path")
    return value


def _revision_field(value: Any, info: ValidationInfo) -> str | None:
    if not isinstance(value, str):
        raise problem(expected("a string", value))
    settings = settings_of(info)
    return _revision(expand(value, settings) if settings is not None else value)


Revision = Annotated[str | None, PlainValidator(_revision_field)]


# --------------------------------------------------------------------------- tables
class ServerShape(Table):
    """The EngineSpec server-shape keys an engine or a model may set (``SERVER_KEYS``)."""

    dtype: Text | None = None
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    gpu_memory_utilization: float | None = None
    tensor_parallel_size: int | None = None
    enable_prefix_caching: bool | None = None
    enforce_eager: bool | None = None
    reasoning_parser: Text | None = None

    def server(self) -> tuple[tuple[str, Any], ...]:
        shape = ((k, getattr(self, k)) for k in SERVER_KEYS)
        return tuple(sorted((k, v) for k, v in shape if v is not None))


assert set(ServerShape.model_fields) == set(SERVER_KEYS), "ServerShape and SERVER_KEYS differ"


class SuiteTable(Table):
    name: Text
    description: Text = ""
    tier: Tier = "smoke"
    baseline_file: Text | None = None
    group_by: Annotated[Text, one_of(("engine", "method"))] = "engine"
    restart_between_repeats: bool = False
    # engine starts per item in a run when --repeat is not given (docs/baselines.md: how many
    # starts a run needs to see a given slowdown on a profile)
    repeat: int = 1

    @field_validator("repeat")
    @classmethod
    def _repeat(cls, n: int) -> int:
        if n < 1:
            raise problem("must be >= 1")
        return n


class EngineTable(ServerShape):
    kind: Text
    label: Text | None = None  # None: the engine's name
    python: Text | None = None
    image: Text | None = None
    extra_args: Strs = ()
    env: dict[str, Text] = {}
    options: Pairs = ()
    startup_timeout_s: float = 900.0
    gpus: int | None = None  # None: tensor_parallel_size (or 1)

    @model_validator(mode="after")
    def _one_build(self) -> EngineTable:
        if self.python and self.image:
            raise problem("give either python or image, not both", "image")
        return self


class MethodTable(Table):
    method: Annotated[Text, one_of(METHODS[1:])] | None = None  # None: the table's name
    draft: Text | None = None
    num_speculative_tokens: int | None = None
    topk: int | None = None
    num_draft_tokens: int | None = None
    ngram_min: int | None = None
    ngram_max: int | None = None
    draft_revision: Revision = None
    engines: Strs = ()
    engine_args: dict[str, Strs] = {}
    options: Pairs = ()

    @field_validator("num_speculative_tokens")
    @classmethod
    def _k(cls, k: int | None) -> int | None:
        if k is not None and k < 1:
            raise problem("must be >= 1")
        return k

    @field_validator("engines")
    @classmethod
    def _engines(cls, engines: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        known = engine_names_of(info)
        for en in engines if known is not None else ():
            if en not in known:
                raise problem(f"unknown engine {en!r} (engines: {', '.join(sorted(known))})")
        return engines

    @field_validator("engine_args")
    @classmethod
    def _engine_args(cls, args: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        known = engine_names_of(info)
        for en in args if known is not None else ():
            if en not in known:
                raise problem("unknown engine", en)
        return args

    def resolved(self, name: str) -> str | None:
        """The speculative method (the table's name when ``method`` is not given)."""
        return self.method or (name if name in METHODS else None)


class ModelTable(ServerShape):
    path: Text
    tokenizer: Text | None = None
    revision: Revision = None
    methods: dict[str, MethodTable] = {}

    @field_validator("methods")
    @classmethod
    def _methods(cls, methods: dict[str, MethodTable]) -> dict[str, MethodTable]:
        for name, x in methods.items():
            if "/" in name or name == NATIVE:
                raise problem("method names may not contain '/' and 'native' is implicit", name)
            method = x.resolved(name)
            if method is None:
                raise problem(f"missing (one of {', '.join(METHODS[1:])})", name, "method")
            if method in ("eagle3", "eagle", "draft_model", "dflash") and not x.draft:
                needs = f"missing: method {method} needs a draft model/head path"
                raise problem(needs, name, "draft")
        return methods


class Sweep(Table):
    """``concurrency`` and ``requests`` (one count, or one per concurrency)."""

    concurrency: Ints = ()
    requests: Ints = ()

    @model_validator(mode="after")
    def _pairs_up(self) -> Sweep:
        conc, reqs = self.concurrency, self.requests
        if not conc and not reqs:
            return self
        if not conc:
            raise problem("missing (requests given without concurrency)", "concurrency")
        if not reqs:
            raise problem("missing (one request count per concurrency)", "requests")
        if len(reqs) == 1:
            reqs = reqs * len(conc)
        if len(reqs) != len(conc):
            raise problem(f"{len(reqs)} counts for {len(conc)} concurrencies", "requests")
        for c, n in zip(conc, reqs, strict=True):
            if n < c:
                raise problem(f"{n} requests is fewer than concurrency {c}", "requests")
        return self

    def pairs(self) -> tuple[tuple[int, int], ...] | None:
        """(concurrency, requests) pairs; None when neither is given."""
        if not self.concurrency:
            return None
        reqs = self.requests * len(self.concurrency) if len(self.requests) == 1 else self.requests
        return tuple(zip(self.concurrency, reqs, strict=True))


class DatasetTable(Sweep):
    tier: Tier | None = None  # None: the suite's tier
    path: Text | None = None
    max_tokens: int | None = None


class OutputTable(Table):
    max_tokens: int = 512
    ignore_eos: bool = False


class SamplingTable(Table):
    temperature: float
    top_p: float = 1.0
    top_k: int = -1
    min_p: float = 0.0
    seed: int = 0
    max_tokens: int | None = None  # None: [output] max_tokens
    ignore_eos: bool | None = None  # None: [output] ignore_eos
    thinking: bool = False

    @model_validator(mode="after")
    def _seeded(self) -> SamplingTable:
        if self.temperature < 0:
            raise problem("must be >= 0", "temperature")
        if self.temperature > 0 and "seed" not in self.model_fields_set:
            raise problem("missing: sampling with temperature > 0 needs a fixed seed", "seed")
        return self


_WL = WorkloadSpec()


class WorkloadTable(Table):
    seed: int = _WL.seed
    request_timeout_s: float | None = None
    stall_timeout_s: float = _WL.stall_timeout_s
    item_deadline_s: float = _WL.item_deadline_s
    prefix_cache: Annotated[Text, one_of(("reset", "disabled", "keep"))] = "reset"
    max_failed_fraction: float = 0.0
    min_duration_s: float = _WL.min_duration_s
    size_to_min_duration: bool = _WL.size_to_min_duration
    min_baseline_days: int = _WL.min_baseline_days
    warmup_requests: int | None = None

    def spec(self) -> WorkloadSpec:
        return WorkloadSpec(
            **self.model_dump(exclude={"warmup_requests"}),  # type: ignore[arg-type]
        )


Direction = Annotated[Text, one_of(("higher", "lower", "equal"))]
GateName = Annotated[Text, one_of(("always", "measured", "never"))]


class MetricTable(Table):
    """A metric policy; keys not given keep the default policy's (DEFAULT_METRICS)."""

    direction: Direction | None = None
    tolerance: float | None = None
    gate: GateName | None = None
    hardware_bound: bool | None = None
    length_dependent: bool | None = None

    @field_validator("tolerance")
    @classmethod
    def _relative(cls, tol: float | None) -> float | None:
        if tol is not None and not 0 <= tol < 10:
            raise problem(f"{tol} is not a relative tolerance (e.g. 0.05 for 5%)")
        return tol


def _names(pattern: str, message: str, kind: str | None = None) -> Any:
    """A table of named tables whose names follow ``pattern`` (``kind``: it may not be empty)."""

    def check(tables: dict[str, Any]) -> dict[str, Any]:
        if kind and not tables:
            raise problem(f"no {kind} defined")
        for name in tables:
            if not re.fullmatch(pattern, name):
                raise problem(message, name)
        return tables

    return field_validator(kind or "sampling")(check)


class SuiteFile(Table):
    """A whole suite file. ``settings`` is read first (its values expand ``${name}``)."""

    settings: dict[str, Any] = {}
    suite: SuiteTable
    engines: dict[str, EngineTable]
    models: dict[str, ModelTable]
    sweep: Sweep = Sweep()
    datasets: dict[str, DatasetTable]
    output: OutputTable = OutputTable()
    sampling: dict[str, SamplingTable] = {}
    workload: WorkloadTable = WorkloadTable()
    metrics: dict[str, MetricTable] = {}
    rules: list[RuleItem] = []
    known_issues: list[KnownIssueTable] = []

    _engines = _names(
        r"[A-Za-z0-9_.]+(-[A-Za-z0-9_.]+)*",
        "engine names may hold letters, digits, '.', '_' and '-'",
        "engines",
    )
    _models = _names(r"(?!-)[^/]*", "model names may not contain '/' or start with '-'", "models")
    _datasets = _names(r"[^/]*", "dataset names may not contain '/'", "datasets")
    _sampling = _names(r"[^/]*", "sampling names may not contain '/'")
    _ids = field_validator("rules")(_unique_ids)

    @field_validator("metrics")
    @classmethod
    def _metric_directions(cls, metrics: dict[str, MetricTable]) -> dict[str, MetricTable]:
        for name, m in metrics.items():
            if m.direction is None and name not in DEFAULT_METRICS:
                raise problem(
                    "missing for a metric without defaults (higher/lower/equal)", name, "direction"
                )
        return metrics


class SettingsTable(Table):
    """The ``[settings]`` of a suite file alone (read before the rest, which they expand)."""

    unknown_key: ClassVar[str | None] = None
    settings: dict[str, Annotated[Any, typed(str, int, float, what="a string or number")]] = {}


__all__ = [
    "DatasetTable",
    "EngineTable",
    "MethodTable",
    "MetricTable",
    "ModelTable",
    "SamplingTable",
    "SettingsTable",
    "SuiteFile",
    "SuiteTable",
    "Sweep",
    "WorkloadTable",
]

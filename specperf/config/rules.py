"""``[[rules]]`` and ``[[known_issues]]`` tables (a suite's, or a baseline file's ``rules``
list): their schema, the Rules they become, and the check that every name a rule's scope uses
exists in the suite."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, ClassVar

from pydantic import ValidationInfo, field_validator, model_validator

from specperf.config.model import GUARDS, RULE_KINDS, DatasetConf, KnownIssue, ModelConf, Rule
from specperf.errors import ConfigError
from specperf.schemas import NATIVE, SamplingParams
from specperf.validation import Strs, Table, Text, one_of, problem, says, typed, validate

MATCH_FIELDS = ("model", "engine", "method", "dataset", "concurrency", "sampling")


def engine_names_of(info: ValidationInfo) -> set[str] | None:
    ctx = info.context
    return ctx.get("engine_names") if isinstance(ctx, Mapping) else None


class KnownIssueTable(Table):
    reason: Text
    link: Text
    until_engine_version: Text | None = None
    until_date: Text | None = None
    match: dict[str, Any] = {}
    metrics: Strs = ()

    @model_validator(mode="after")
    def _expiry(self) -> KnownIssueTable:
        if not self.until_engine_version and not self.until_date:
            raise problem("a known issue needs an expiry: until_engine_version or until_date")
        if self.until_date and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", self.until_date):
            raise problem(f"expected YYYY-MM-DD, got {self.until_date!r}", "until_date")
        for name in self.match:
            if name not in MATCH_FIELDS:
                raise problem(
                    f"unknown field {name!r} (allowed: {', '.join(MATCH_FIELDS)})", "match"
                )
        return self

    def issue(self) -> KnownIssue:
        return KnownIssue.of(self)


MatchValue = Annotated[Any, typed(str, int, list, what="a string or an integer or a list")]


class RuleTable(Table):
    """One ``[[rules]]`` table: its kind, its scope (the key fields) and its bound."""

    kind: Annotated[Text, one_of(RULE_KINDS)] | None = None
    id: Text | None = None  # None: "<kind>-<index>"
    model: MatchValue = None
    engine: MatchValue = None
    method: MatchValue = None
    dataset: MatchValue = None
    concurrency: MatchValue = None
    sampling: MatchValue = None
    metric: Text = "output_throughput_tok_s"
    min: float | None = None
    max: float | None = None
    reference_engine: Text | None = None
    guard: Annotated[Text, one_of(GUARDS)] | None = None
    known_issue: KnownIssueTable | None = None
    evidence: Text | None = None

    @model_validator(mode="after")
    def _complete(self, info: ValidationInfo) -> RuleTable:
        kind, match = self.kind, self.match()
        if kind is None:
            raise problem(f"missing (one of {', '.join(RULE_KINDS)})", "kind")
        known = engine_names_of(info)
        if "engine" in match and known is not None:
            for en in match["engine"] if isinstance(match["engine"], list) else [match["engine"]]:
                if en != "*" and en not in known:
                    raise problem(f"unknown engine {en!r}", "engine")
        if self.min is None and self.max is None and kind != "guard":
            raise problem("a rule needs min and/or max", "min")
        if kind == "speedup" and "method" not in match:
            raise problem("missing: a speedup rule names the method compared with native", "method")
        if kind == "cross_engine":
            if not self.reference_engine:
                raise problem("missing: the engine this one is compared with", "reference_engine")
            if known is not None and self.reference_engine not in known:
                raise problem(f"unknown engine {self.reference_engine!r}", "reference_engine")
            if "engine" not in match:
                raise problem("missing: the engine whose figure is compared", "engine")
        if kind == "guard" and not self.guard:
            raise problem(f"missing (one of {', '.join(GUARDS)})", "guard")
        return self

    def match(self) -> dict[str, Any]:
        """The scope: the key fields the table gives."""
        return {k: getattr(self, k) for k in MATCH_FIELDS if k in self.model_fields_set}


RuleItem = Annotated[RuleTable, says("expected a table ([[rules]]), got {type} {got}")]


def _unique_ids(rules: list[RuleTable]) -> list[RuleTable]:
    ids = [r.id or f"{r.kind}-{i}" for i, r in enumerate(rules)]
    for rid in ids:
        if ids.count(rid) > 1:
            raise problem(f"rule id {rid!r} used twice")
    return rules


class RulesList(Table):
    """A list of ``[[rules]]`` tables (a suite's, or a baseline file's ``rules``)."""

    unknown_key: ClassVar[str | None] = None
    rules: list[RuleItem] = []

    _ids = field_validator("rules")(_unique_ids)


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


def rules_from_tables(tables: Iterable[RuleTable]) -> tuple[Rule, ...]:
    """Validated ``[[rules]]`` tables → Rules (an unnamed rule is ``<kind>-<index>``)."""
    return tuple(
        Rule(
            id=t.id or f"{t.kind}-{i}",
            kind=str(t.kind),
            match=tuple(sorted(t.match().items(), key=lambda kv: kv[0])),
            metric=t.metric,
            min=t.min,
            max=t.max,
            reference_engine=t.reference_engine,
            guard=t.guard,
            known_issue=t.known_issue.issue() if t.known_issue is not None else None,
            evidence=t.evidence,
        )
        for i, t in enumerate(tables)
    )


def parse_rules(
    raw: list[Any],
    source: str,
    engine_names: set[str] | None,
    settings: Mapping[str, str] | None = None,
) -> tuple[Rule, ...]:
    """``[[rules]]`` tables (a suite's, or a baseline file's ``rules`` list) → Rules.
    ``engine_names`` None skips the engine-name check (baseline files know no suite)."""
    context = {"settings": dict(settings or {}), "engine_names": engine_names}
    return rules_from_tables(validate(RulesList, {"rules": raw}, source, context=context).rules)

"""``[[rules]]`` tables (a suite's, or a baseline file's ``rules`` list) → Rules, and the check
that every name a rule's scope uses exists in the suite."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from specperf.config.model import GUARDS, RULE_KINDS, DatasetConf, ModelConf, Rule
from specperf.config.reader import MATCH_FIELDS, _known_issue, _Reader
from specperf.errors import ConfigError
from specperf.schemas import NATIVE, SamplingParams


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

"""Suite file → ``Suite``: find it (a packaged name or a path), read the TOML, validate it
against the ``SuiteFile`` model (``[settings]`` expanded), so each problem is one line naming the
file, the dotted key and what is wrong, and turn its tables into the domain records."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from specperf.config.matrix import Suite
from specperf.config.model import (
    DEFAULT_CONCURRENCY,
    DEFAULT_METRICS,
    DEFAULT_REQUESTS,
    DatasetConf,
    EngineConf,
    MethodConf,
    MetricPolicy,
    ModelConf,
)
from specperf.config.rules import check_rule_scope, rules_from_tables
from specperf.config.schema import (
    EngineTable,
    MetricTable,
    ModelTable,
    OutputTable,
    SamplingTable,
    SettingsTable,
    SuiteFile,
)
from specperf.errors import ConfigError
from specperf.schemas import SamplingParams
from specperf.validation import validate

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


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
    raw = validate(SettingsTable, {"settings": data.get("settings", {})}, source).settings
    settings = {k: str(v) for k, v in raw.items()}
    for k, v in overrides.items():
        if k not in settings:
            raise ConfigError(
                f"--setting {k}: {source} has no such setting "
                f"(known: {', '.join(sorted(settings)) or 'none'})"
            )
        settings[k] = v
    engines = data.get("engines")
    names = set(engines) if isinstance(engines, dict) else set()
    context = {"settings": settings, "engine_names": names}
    f = validate(SuiteFile, data, source, context=context)

    sweep = f.sweep.pairs() or tuple(zip(DEFAULT_CONCURRENCY, DEFAULT_REQUESTS, strict=True))
    models = tuple(_model(name, m) for name, m in f.models.items())
    datasets = tuple(
        DatasetConf(name=n, tier=d.tier, path=d.path, max_tokens=d.max_tokens, sweep=d.pairs())
        for n, d in f.datasets.items()
    )
    sampling = tuple(_sampling(n, x, f.output) for n, x in f.sampling.items()) or (
        SamplingParams(
            name="greedy",
            temperature=0.0,
            max_tokens=f.output.max_tokens,
            ignore_eos=f.output.ignore_eos,
        ),
    )
    rules = rules_from_tables(f.rules)
    check_rule_scope(rules, source, models, datasets, sampling, sweep)
    return Suite(
        name=f.suite.name,
        source=source,
        description=f.suite.description,
        tier=f.suite.tier,
        baseline_file=f.suite.baseline_file,
        models=models,
        engines=tuple(_engine(name, e) for name, e in f.engines.items()),
        datasets=datasets,
        sweep=sweep,
        sampling=sampling,
        workload=f.workload.spec(),
        metrics=_metrics(f.metrics),
        rules=rules,
        known_issues=tuple(k.issue() for k in f.known_issues),
        settings=tuple(sorted(settings.items())),
        warmup_requests=f.workload.warmup_requests,
        group_by=f.suite.group_by,
        restart_between_repeats=f.suite.restart_between_repeats,
        repeat=f.suite.repeat,
    )


def _engine(name: str, e: EngineTable) -> EngineConf:
    server = e.server()
    return EngineConf(
        name=name,
        kind=e.kind,
        label=e.label if e.label is not None else name,
        python=e.python,
        image=e.image,
        extra_args=e.extra_args,
        env=tuple(sorted(e.env.items())),
        options=e.options,
        server=server,
        startup_timeout_s=e.startup_timeout_s,
        gpus=e.gpus if e.gpus is not None else dict(server).get("tensor_parallel_size", 1),
    )


def _model(name: str, m: ModelTable) -> ModelConf:
    methods = tuple(
        MethodConf(
            name=mname,
            method=x.resolved(mname) or mname,
            draft_model=x.draft,
            num_speculative_tokens=x.num_speculative_tokens,
            topk=x.topk,
            num_draft_tokens=x.num_draft_tokens,
            ngram_min=x.ngram_min,
            ngram_max=x.ngram_max,
            draft_revision=x.draft_revision,
            engines=x.engines or None,
            engine_args=tuple(x.engine_args.items()),
            options=x.options,
        )
        for mname, x in m.methods.items()
    )
    return ModelConf(
        name=name,
        path=m.path,
        tokenizer=m.tokenizer,
        server=m.server(),
        methods=methods,
        revision=m.revision,
    )


def _sampling(name: str, x: SamplingTable, out: OutputTable) -> SamplingParams:
    return SamplingParams(
        name=name,
        temperature=x.temperature,
        top_p=x.top_p,
        top_k=x.top_k,
        min_p=x.min_p,
        seed=x.seed,
        max_tokens=x.max_tokens if x.max_tokens is not None else out.max_tokens,
        ignore_eos=x.ignore_eos if x.ignore_eos is not None else out.ignore_eos,
        thinking=x.thinking,
    )


def _metrics(tables: Mapping[str, MetricTable]) -> dict[str, MetricPolicy]:
    """DEFAULT_METRICS with the suite's [metrics.<name>] over them (a key not given keeps the
    default policy's value)."""
    out = dict(DEFAULT_METRICS)
    for name, x in tables.items():
        base = out.get(name)
        default = base.to_json() if base else {"tolerance": 0.05, "gate": "always"}
        out[name] = MetricPolicy(**{**default, "name": name, **x.model_dump(exclude_none=True)})
    return out

"""Suite file → ``Suite``: find it (a packaged name or a path), read the TOML, expand
``[settings]`` and build every table through ``_Reader``, so each problem is one line naming the
file, the dotted key and what is wrong."""

from __future__ import annotations

import re
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
    METHODS,
    DatasetConf,
    EngineConf,
    MethodConf,
    MetricPolicy,
    ModelConf,
)
from specperf.config.reader import _known_issue, _pairs, _parse_sweep, _Reader, _server
from specperf.config.rules import _parse_rules, check_rule_scope
from specperf.errors import ConfigError
from specperf.schemas import NATIVE, SamplingParams, WorkloadSpec

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
        min_baseline_days=r.get("min_baseline_days", int, default=base.min_baseline_days),
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

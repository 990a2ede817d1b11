"""Suite file (TOML) → typed objects: models, engines, methods, datasets, sweep, sampling,
metric policies, rules and known issues; and the matrix of items it expands to.

A suite is declarative so that adding a model or an engine version is an edit of one file, not
of test code. Every problem in a file is reported as one line naming the file, the key and what
is wrong (``ConfigError``). See docs/suite.md for the format.

One job per module: ``model`` (the records and the default tolerances), ``matrix`` (Suite,
Item, Filters, the EngineSpec of an item), ``schema`` (the file format as pydantic models: types,
defaults, rules of the format, file + dotted-key errors), ``rules`` (``[[rules]]`` and
``[[known_issues]]``, their scope check), ``loading`` (find, read and validate a suite
file, build the records). Every name stays importable from ``specperf.config``.
"""

from __future__ import annotations

from specperf.config.loading import find_suite, load_suite, packaged_suites, parse_suite, tomllib
from specperf.config.matrix import (
    KV_CACHE_ENV,
    SERVER_KEYS,
    Filters,
    Item,
    Suite,
    build_spec,
    kv_cache_space,
)
from specperf.config.model import (
    DEFAULT_CONCURRENCY,
    DEFAULT_METRICS,
    DEFAULT_REQUESTS,
    GUARDS,
    LENGTH_METRIC,
    METHODS,
    RULE_KINDS,
    DatasetConf,
    Direction,
    EngineConf,
    Gate,
    ItemKey,
    KnownIssue,
    MethodConf,
    MetricPolicy,
    ModelConf,
    Rule,
)
from specperf.config.rules import MATCH_FIELDS, check_rule_scope, parse_rules
from specperf.schemas import NATIVE

__all__ = [
    "DEFAULT_CONCURRENCY",
    "DEFAULT_METRICS",
    "DEFAULT_REQUESTS",
    "GUARDS",
    "KV_CACHE_ENV",
    "LENGTH_METRIC",
    "MATCH_FIELDS",
    "METHODS",
    "NATIVE",
    "RULE_KINDS",
    "SERVER_KEYS",
    "DatasetConf",
    "Direction",
    "EngineConf",
    "Filters",
    "Gate",
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
    "kv_cache_space",
    "load_suite",
    "packaged_suites",
    "parse_rules",
    "parse_suite",
    "tomllib",
]

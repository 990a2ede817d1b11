"""File schemas as pydantic models, and their errors as one line: ``file: dotted.key: problem``.

The suite TOML (specperf.config.schema), the baseline JSON (specperf.baseline_schema) and the
results folder's ``suite.json`` snapshot (specperf.verdict.snapshot) are typed models built on
``Table``. Validation, defaults and messages come from the models: a strict type mismatch reads
``expected a string, got int 1``; an unknown key ``unknown key (allowed: ...)``; a required key
``missing (required)``; a rule of the format raises ``problem(...)`` with the key it is about.
``validate`` runs a model and turns the first error of a ``ValidationError`` into a
``ConfigError`` (one line, no traceback, printed once by the CLI).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Annotated, Any, ClassVar, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    PlainValidator,
    ValidationError,
    ValidationInfo,
    WrapValidator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from specperf.errors import ConfigError

PROBLEM = "specperf"  # the error type of every problem() the models raise


def problem(text: str, *key: str | int) -> PydanticCustomError:
    """An error of the format; ``key`` (below the validated value) is added to its location."""
    return PydanticCustomError(PROBLEM, "{problem}", {"problem": text, "key": key})


def expected(what: str, value: Any) -> str:
    return f"expected {what}, got {type(value).__name__} {value!r}"


class Table(BaseModel):
    """A table of a file: strict types, no unknown keys, required keys named when absent."""

    model_config = ConfigDict(strict=True, frozen=True, extra="ignore", populate_by_name=True)
    # how an unknown key is reported ({allowed}: the keys the table knows); None: ignored
    unknown_key: ClassVar[str | None] = "unknown key (allowed: {allowed})"
    # what a required key's absence says, by key ("missing (required)" otherwise)
    missing: ClassVar[Mapping[str, str]] = {}

    @model_validator(mode="wrap")
    @classmethod
    def _keys(cls, data: Any, handler: Callable[[Any], Any]) -> Any:
        # the keys' own problems first, in the order of the fields; unknown keys last
        try:
            out = handler(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            if first["type"] == "missing" and len(first["loc"]) == 1:
                name = str(first["loc"][0])
                if name in cls.missing:
                    raise problem(cls.missing[name], name) from None
            raise
        if cls.unknown_key is not None and isinstance(data, dict):
            names = {f.alias or n for n, f in cls.model_fields.items()}
            for key in data:
                if key not in names:
                    allowed = ", ".join(sorted(names))
                    raise problem(cls.unknown_key.format(allowed=allowed), key)
        return out


# --------------------------------------------------------------------------- field types
def says(message: str) -> WrapValidator:
    """Report a value of the wrong shape with ``message`` instead of pydantic's words
    (``{got}``: the value's repr; ``{type}``: its type); errors inside it pass through."""

    def wrap(value: Any, handler: Callable[[Any], Any]) -> Any:
        try:
            return handler(value)
        except ValidationError as exc:
            if any(e["loc"] for e in exc.errors()) or any(
                e["type"] == PROBLEM for e in exc.errors()
            ):
                raise
            raise problem(message.format(got=repr(value), type=type(value).__name__)) from None

    return WrapValidator(wrap)


def one_of(choices: Iterable[str], message: str = "{value!r} is not one of {choices}") -> Any:
    """A string that must be one of ``choices``."""
    options = tuple(choices)

    def check(value: str) -> str:
        if value not in options:
            raise problem(message.format(value=value, choices=", ".join(options)))
        return value

    return AfterValidator(check)


def expand(text: str, settings: Mapping[str, str]) -> str:
    """``${name}`` → the suite's [settings] value (an unknown name is an error)."""

    def repl(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in settings:
            raise problem(f"unknown setting ${{{name}}} (define it under [settings])")
        return settings[name]

    return re.sub(r"\$\{([A-Za-z0-9_.-]+)\}", repl, text)


def settings_of(info: ValidationInfo) -> Mapping[str, str] | None:
    ctx = info.context
    return ctx.get("settings") if isinstance(ctx, Mapping) else None


def _expand_text(value: str, info: ValidationInfo) -> str:
    settings = settings_of(info)
    return value if settings is None else expand(value, settings)


# A string with ${settings} expanded (when validated with a ``settings`` context).
Text = Annotated[str, AfterValidator(_expand_text)]


def _strs(value: Any, info: ValidationInfo) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise problem(expected("a list or a string", value))
    for v in value:
        if not isinstance(v, str):
            raise problem(f"expected a list of strings, found {v!r}")
    return tuple(_expand_text(v, info) for v in value)


# A string or a list of strings (each expanded) → a tuple.
Strs = Annotated[tuple[str, ...], PlainValidator(_strs)]


def _ints(value: Any) -> tuple[int, ...]:
    if isinstance(value, bool) or not isinstance(value, (int, list)):
        raise problem(expected("a list or an integer", value))
    for v in [value] if isinstance(value, int) else value:
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise problem(f"expected positive integers, found {v!r}")
    return (value,) if isinstance(value, int) else tuple(value)


# A positive integer or a list of them → a tuple.
Ints = Annotated[tuple[int, ...], PlainValidator(_ints)]


# An int or a float (never a bool, never a numeric string).
Number = Annotated[float, says("expected a number, got {got}")]
# An int (never a bool or a float).
Integer = Annotated[int, says("expected an integer, got {got}")]


def typed(*types: type, what: str) -> PlainValidator:
    """A value of any of ``types`` (bool is never an int); strings expanded."""

    def check(value: Any, info: ValidationInfo) -> Any:
        if (isinstance(value, bool) and bool not in types) or not isinstance(value, types):
            raise problem(expected(what, value))
        return _expand_text(value, info) if isinstance(value, str) else value

    return PlainValidator(check)


# --------------------------------------------------------------------------- errors
_TYPE_WORDS = {
    "string_type": "a string",
    "int_type": "an integer",
    "float_type": "a number",
    "bool_type": "true/false",
    "list_type": "a list",
    "tuple_type": "a list",
    "dict_type": "{table}",
    "model_type": "{table}",
    "model_attributes_type": "{table}",
    "dataclass_type": "{table}",
}


def dotted(loc: Iterable[str | int]) -> str:
    """``("rules", 0, "known_issue", "link")`` → ``rules[0].known_issue.link``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "<top>"


def error_line(exc: ValidationError, source: str, table: str = "a table") -> str:
    """The first error of ``exc`` as ``source: dotted.key: problem``."""
    err = exc.errors(include_url=False)[0]
    loc = list(err["loc"])
    ctx = err.get("ctx") or {}
    if err["type"] == PROBLEM:
        loc += list(ctx.get("key") or ())
        text = str(ctx["problem"])
    elif err["type"] == "missing":
        text = "missing (required)"
    elif err["type"] in _TYPE_WORDS:
        text = expected(_TYPE_WORDS[err["type"]].format(table=table), err["input"])
    else:
        text = err["msg"]
    return f"{source}: {dotted(loc)}: {text}"


M = TypeVar("M", bound=BaseModel)


def validate(
    model: type[M],
    data: Any,
    source: str,
    *,
    context: Mapping[str, Any] | None = None,
    table: str = "a table",
) -> M:
    """``data`` as ``model``, or a one-line ConfigError naming ``source``, the key and why."""
    try:
        return model.model_validate(data, context=dict(context or {}))
    except ValidationError as exc:
        raise ConfigError(error_line(exc, source, table)) from None


__all__ = [
    "Integer",
    "Ints",
    "Number",
    "Strs",
    "Table",
    "Text",
    "dotted",
    "error_line",
    "expand",
    "expected",
    "one_of",
    "problem",
    "says",
    "typed",
    "validate",
]

"""Exceptions with one-line, user-facing messages (they name the file, field or flag)."""

from __future__ import annotations


class SpecperfError(Exception):
    """Base for errors shown to the user as a single line, without a traceback."""


class ConfigError(SpecperfError):
    """A suite, baseline or dataset file is malformed; the message names file and key."""


class EngineStartError(SpecperfError):
    """An engine did not become ready; the message carries the tail of its log."""


class EngineDiedError(SpecperfError):
    """An engine process exited or stopped answering during an item."""


class UnsupportedError(SpecperfError):
    """The engine cannot run this item as asked (e.g. concurrency > 1 on a batch-size-1
    speculative path); the suite reports a skip with this message, not a failure."""

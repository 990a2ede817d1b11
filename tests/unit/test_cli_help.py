"""`specperf --help` and every subcommand's help are written for users: an overview with
examples (no developer docstring), a description per command, placeholders that say what to
type (DIR, FILE, N, SECONDS), never argparse's upper-cased option name."""

from __future__ import annotations

import argparse
import re

import pytest

from specperf.cli import COMMANDS, build_parser, commands


def helps(parser: argparse.ArgumentParser, prefix: str = "specperf"):
    yield prefix, parser.format_help()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from helps(sub, f"{prefix} {name}")


def test_overview_is_for_users() -> None:
    text = build_parser().format_help()
    assert "Thin" not in text and "add_arguments" not in text and "``" not in text
    assert "pytest -m perf" in text and "examples:" in text
    for name in commands():
        assert re.search(rf"^\s+{name}\s+\S", text, re.M), name


@pytest.mark.parametrize("name", [*COMMANDS, "model", "gpu-night"])
def test_every_command_has_a_description_with_an_example(name: str) -> None:
    text = dict(helps(build_parser()))[f"specperf {name}"]
    assert f"specperf {name}" in text.split("\n\n", 2)[2]  # an example after the usage lines


def test_placeholders_say_what_to_type() -> None:
    """Directories, files, seconds and profiles have their own placeholder, not the option's
    upper-cased name (``--baselines-dir BASELINES_DIR``, ``--out OUT``, ``--timeout TIMEOUT``)."""
    bad = re.compile(r"--[a-z-]+ ([A-Z_]*(?:DIR|OUT|TIMEOUT|DEADLINE|PROFILE|JSON|BASELINE)\b)")
    for where, text in helps(build_parser()):
        found = [m for m in bad.findall(text) if m not in ("DIR", "OTHER_RESULTS_DIR")]
        assert not found, (where, found)
    text = dict(helps(build_parser()))["specperf bench"]
    assert "--request-timeout SECONDS" in text and "--output FILE" in text
    assert "--num-requests N" in text and "measured requests" in text

"""The product finds the testkit's parts through entry points (specperf.model_sources for model
names such as ``tiny:qwen3``, specperf.commands for subcommands) or explicit registration, and
names the model and the fix when no source is installed. Entry points are tested through a real
distribution (a dist-info folder on sys.path), never a mocked importlib.metadata."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from specperf import cli, model_sources, modelid, pool
from specperf.engines.base import EngineSpec
from specperf.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]

DEMO_MODULE = '''
from pathlib import Path

class DemoSource:
    """demo:<name> -> <root>/<name>; identity demo:<name>@v1."""
    root = Path(".")

    def resolve(self, ref):
        return self.root / ref.split(":", 1)[1]

    def identity(self, ref):
        return ref + "@v1"

SOURCE = DemoSource()
COMMAND = ("demo_source", "a demo subcommand", "Runs the demo.\\n\\n  specperf demo-run")

def add_arguments(parser):
    parser.add_argument("--code", type=int, default=7)

def run(args):
    return args.code
'''


def _install(tmp_path: Path, entry_points: str) -> Path:
    """A distribution named specperf-demo on sys.path: a module and its dist-info."""
    site = tmp_path / "site"
    info = site / "specperf_demo-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: specperf-demo\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))
    (site / "demo_source.py").write_text(DEMO_MODULE)
    return site


@pytest.fixture()
def demo_dist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    site = _install(
        tmp_path,
        """
        [specperf.model_sources]
        demo = demo_source:SOURCE

        [specperf.commands]
        demo-run = demo_source:COMMAND
        """,
    )
    monkeypatch.syspath_prepend(str(site))
    model_sources.refresh()
    yield site
    model_sources.unregister("demo")
    sys.modules.pop("demo_source", None)
    monkeypatch.undo()
    model_sources.refresh()


def test_an_entry_point_source_resolves_specs_and_fingerprints(demo_dist: Path) -> None:
    import demo_source

    demo_source.SOURCE.root = demo_dist
    assert model_sources.scheme_of("demo:a") == "demo"
    spec = EngineSpec(kind="transformers", label="t", model="demo:a", draft_model="demo:b")
    resolved = pool.resolve_spec(spec)
    assert (resolved.model, resolved.draft_model) == (str(demo_dist / "a"), str(demo_dist / "b"))
    assert modelid.model_identity("demo:a") == "demo:a@v1"


def test_an_entry_point_subcommand_runs(demo_dist: Path) -> None:
    assert "demo-run" in cli.commands()
    assert cli.main(["demo-run", "--code", "3"]) == 3


def test_explicit_registration_comes_before_entry_points(demo_dist: Path, tmp_path) -> None:
    class Other:
        def resolve(self, ref: str) -> Path:
            return tmp_path / "other"

        def identity(self, ref: str) -> str:
            return "other"

    model_sources.register("demo", Other())
    assert model_sources.resolve("demo:a") == tmp_path / "other"
    assert modelid.model_identity("demo:x") == "other"
    with pytest.raises(TypeError, match="no resolve"):
        model_sources.register("bad", object())  # type: ignore[arg-type]


def test_no_installed_source_is_one_clear_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """specperf installed without its testkit's entry point (a group no distribution declares
    here): a `tiny:` name says which model and what to do, and is never taken for a path."""
    monkeypatch.setattr(model_sources, "ENTRY_POINT_GROUP", "specperf.model_sources.none")
    monkeypatch.setattr(model_sources, "_registered", {})
    model_sources.refresh()
    try:
        with pytest.raises(ConfigError) as err:
            modelid.model_identity("tiny:qwen3")
        text = str(err.value)
        assert "\n" not in text and text.startswith("tiny:qwen3: no model source for 'tiny:'")
        assert "pip install -e ." in text
        with pytest.raises(ConfigError, match="tiny:qwen3-eagle3"):
            pool.resolve_spec(EngineSpec(kind="transformers", label="t", model="tiny:qwen3-eagle3"))
    finally:
        monkeypatch.undo()
        model_sources.refresh()


@pytest.mark.parametrize(
    "ref",
    ["/models/Qwen3-8B", "Qwen/Qwen3-8B@abc", "C:\\models\\q", "http://host/m", "x:y", "a/b:c"],
)
def test_paths_and_hub_ids_are_not_source_references(ref: str) -> None:
    assert model_sources.scheme_of(ref) is None


def test_pyproject_declares_the_testkit_parts(tmp_path: Path, monkeypatch) -> None:
    """pyproject.toml's entry points, installed as a distribution of their own, give the tiny
    source and the testkit's subcommands (what `pip install -e .` registers)."""
    from specperf.testkit.commands import GPU_NIGHT, MODEL
    from specperf.testkit.tiny_source import SOURCE

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    text = ""
    for group in (model_sources.ENTRY_POINT_GROUP, cli.ENTRY_POINT_GROUP):
        text += f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in declared[group].items())
    monkeypatch.syspath_prepend(str(_install(tmp_path, text)))
    monkeypatch.setattr(model_sources, "_registered", {})
    model_sources.refresh()
    try:
        assert model_sources.source_for("tiny:qwen3") is SOURCE
        assert modelid.model_identity("tiny:qwen3") == SOURCE.identity("tiny:qwen3")
        found = cli.commands()
        assert (found["model"], found["gpu-night"]) == (MODEL, GPU_NIGHT)
    finally:
        monkeypatch.undo()
        model_sources.refresh()

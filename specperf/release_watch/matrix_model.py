"""The release matrix as one JSON file (``matrix.json``): what was planned, what ran, and every
cell (release × item × metric) with its values and verdicts. The table, the charts, the
terminal summary, ``--resume`` and ``specperf watch bisect`` all read this file and nothing
else.

Statuses of a run: ``pending`` (planned), ``done`` (pytest ran; its results directory holds
what it measured), ``failed`` (pytest exited with an error and wrote no item result),
``not_installable`` (``specperf env create`` refused the release; ``reason`` says why),
``not_evaluated`` (pytest ran and every item was skipped as NOT EVALUATED, e.g. the release
lacks the method; ``reason`` holds the engine's first refusal) and ``interrupted`` (Ctrl-C or
a crash during the run: ``--resume`` runs it again).

Verdict statuses of a cell: ``same`` (an exact metric identical to the comparand's), ``changed``
(an exact metric differs, within the suite's tolerance or in the good direction), ``pass``,
``fail`` (regressed), ``not_evaluated`` (gated but not judged; ``reason``), ``info``
(reported, not gated), ``stale`` (measured differently: not compared), ``missing`` (the
comparand has no value) and ``reference`` (the reference release's own cells).
"""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from specperf.errors import ConfigError
from specperf.results import write_json_atomic
from specperf.validation import validate

MATRIX_FILE = "matrix.json"
SCHEMA = 1

RunStatus = Literal["pending", "done", "failed", "not_installable", "not_evaluated", "interrupted"]
Role = Literal["reference", "candidate"]

# metric family -> its title; the order of the report's tables
FAMILIES: dict[str, str] = {
    "mal": "MAL (mean acceptance length)",
    "acceptance": "acceptance rate",
    "positions": "per-position acceptance",
    "tokens": "output tokens",
    "greedy": "greedy-match guard (share of outputs equal to native's)",
    "speed": "tok/s vs reference (engine-wide ratio and per item)",
    "latency": "TTFT / TPOT (ms)",
    "other": "other checks",
}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Stack(_Model):
    """The software a run measured with, read from its run summaries' environment record."""

    engine: str | None = None  # the engine's reported version
    torch: str | None = None
    torch_build: str | None = None  # "pinned" or "generic" where the env records it
    transformers: str | None = None

    def line(self) -> str:
        torch = self.torch or "?"
        if self.torch_build:
            torch += f" ({self.torch_build})"
        tf = self.transformers or "?"
        return f"engine {self.engine or '?'}, torch {torch}, transformers {tf}"


class Run(_Model):
    """One suite run of one release, in schedule order."""

    index: int  # 1-based position in the schedule
    release: str
    role: Role
    status: RunStatus = "pending"
    results_dir: str
    reason: str | None = None
    exit_code: int | None = None
    wall_s: float | None = None
    started: str | None = None
    finished: str | None = None
    stack: Stack | None = None


class Verdict(_Model):
    """One cell judged against a comparand (the reference runs or the previous release)."""

    status: str
    against: str  # "reference 0.32.0 (5 runs)" / "previous 0.30.0"
    method: str  # "exact" | "verdict" | "same-run rule" | "none"
    delta: float | None = None  # relative change against the comparand
    reason: str = ""


class Cell(_Model):
    """One release × item × metric."""

    release: str
    item: str  # the item's key ("model/engine/method/dataset/cN/sampling") or "engine E"
    metric: str
    family: str
    values: list[float] = Field(default_factory=list)  # one per engine start (or per run)
    value: float | None = None
    vs_reference: Verdict | None = None
    vs_previous: Verdict | None = None


class ReleaseRow(_Model):
    """One release's outcome in the matrix."""

    release: str
    role: Role
    # pass | changed | regression | not installable | not evaluated | not run | failed | reference
    status: str
    reason: str = ""
    stack: Stack | None = None
    runs: int = 0  # finished runs of this release


class Matrix(_Model):
    """The whole matrix (see the module doc)."""

    schema_version: int = SCHEMA
    suite: str
    engine: str
    package: str
    setting: str
    reference: str
    releases: list[str]  # candidates and the reference, in version order
    pytest_args: list[str] = Field(default_factory=list)
    settings: dict[str, str] = Field(default_factory=dict)
    torch_build: str | None = None
    runs: list[Run] = Field(default_factory=list)  # the schedule, with each run's outcome
    not_installable: dict[str, str] = Field(default_factory=dict)  # release -> reason
    not_repeatable: list[str] = Field(default_factory=list)  # "item | metric" rows
    rows: list[ReleaseRow] = Field(default_factory=list)
    cells: list[Cell] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    created: str = Field(default_factory=lambda: now_iso())
    updated: str | None = None

    @property
    def candidates(self) -> list[str]:
        return [r for r in self.releases if r != self.reference]

    def runs_of(self, release: str, role: Role | None = None) -> list[Run]:
        return [r for r in self.runs if r.release == release and (role is None or r.role == role)]

    def done(self, release: str, role: Role | None = None) -> list[Run]:
        return [r for r in self.runs_of(release, role) if r.status == "done"]

    def row(self, release: str) -> ReleaseRow | None:
        return next((r for r in self.rows if r.release == release), None)

    def save(self, path: Path) -> None:
        self.updated = now_iso()
        write_json_atomic(path, self.model_dump(mode="json"))


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def load_matrix(path: Path | str) -> Matrix:
    """A ``matrix.json``, or a one-line ConfigError naming the file and the problem."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read the matrix: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{p}: not valid JSON ({exc.msg})") from None
    if isinstance(data, dict) and data.get("schema_version", SCHEMA) != SCHEMA:
        raise ConfigError(
            f"{p}: matrix schema_version {data.get('schema_version')!r}, this specperf reads "
            f"{SCHEMA}"
        )
    return validate(Matrix, data, str(p), table="the matrix")

"""Running a release matrix: which releases, in which order (the reference interleaved between
candidates), one environment and one suite run per scheduled run, progress with an ETA, and a
``matrix.json`` saved after every step so that Ctrl-C or a crash loses nothing and ``--resume``
goes on where the matrix stopped.

Each run is ``pytest -m perf`` into its own results directory (``runs/NN-role-release``) with a
scratch baselines directory: the reference runs write their entries there (the first one
starts it, later ones append), and each candidate run starts from a copy, so an item the first
reference run sized sends the same request count in every run (release_watch.watch does the
same for the pinned release).
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from packaging.version import InvalidVersion, Version

from specperf.errors import ConfigError, SpecperfError
from specperf.fileio import read_jsonl
from specperf.pool import START_LOG
from specperf.release_watch.matrix_model import (
    MATRIX_FILE,
    Matrix,
    Run,
    load_matrix,
    now_iso,
)
from specperf.release_watch.running import Runner, _safe, pytest_command, run_logged
from specperf.release_watch.targets import Target
from specperf.verdict import SUMMARY

Say = Callable[[str], None]
ENV_ERROR = "specperf env: error: "  # how specperf env create starts its one-line reason


# --------------------------------------------------------------------------- releases
def _version(text: str, flag: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        raise ConfigError(f"{flag} {text!r}: not a release version (PEP 440)") from None


def sort_releases(versions: Sequence[str]) -> list[str]:
    """Releases in PEP 440 order, duplicates and unparsable names left out."""
    seen: dict[Version, str] = {}
    for v in versions:
        try:
            seen.setdefault(Version(v), v)
        except InvalidVersion:
            continue
    return [seen[k] for k in sorted(seen)]


def releases_between(
    versions: Sequence[str],
    low: str,
    high: str,
    *,
    pre: bool = False,
    inclusive: bool = True,
    flags: tuple[str, str] = ("--from", "--to"),
) -> list[str]:
    """The releases from ``low`` to ``high`` (both included unless ``inclusive`` is False), in
    order; pre-releases and dev builds only with ``pre`` (an end named explicitly is kept)."""
    lo, hi = _version(low, flags[0]), _version(high, flags[1])
    if lo > hi:
        raise ConfigError(f"{flags[0]} {low} is newer than {flags[1]} {high}")
    out = []
    for text in sort_releases(versions):
        v = Version(text)
        if (v.is_prerelease or v.is_devrelease) and not pre and text not in (low, high):
            continue
        if (lo <= v <= hi) if inclusive else (lo < v < hi):
            out.append(text)
    return out


def parse_versions(text: str) -> list[str]:
    """``--versions a,b,c`` as a list (each checked as a version)."""
    out = [v.strip() for v in text.split(",") if v.strip()]
    if not out:
        raise ConfigError("--versions: expected a comma-separated list of releases")
    for v in out:
        _version(v, "--versions")
    return out


def schedule(reference: str, candidates: Sequence[str], every: int = 1) -> list[tuple[str, str]]:
    """(release, role) in run order: the reference first and after every ``every`` candidates
    (R C1 R C2 R … Cn R), so the host's drift over the matrix sits inside the reference's own
    spread. A candidate equal to the reference is the reference (not run twice)."""
    if every < 1:
        raise ConfigError(f"--reference-every {every}: must be >= 1")
    cands = [c for c in candidates if c != reference]
    out = [(reference, "reference")]
    for i, c in enumerate(cands, 1):
        out.append((c, "candidate"))
        if i % every == 0 or i == len(cands):
            out.append((reference, "reference"))
    return out


# --------------------------------------------------------------------------- the plan
@dataclass
class MatrixPlan:
    """What ``specperf watch matrix`` was asked to run."""

    target: Target
    suite: str
    releases: list[str]  # candidates (the reference may be among them)
    reference: str
    results_dir: Path
    settings: Mapping[str, str] = field(default_factory=dict)
    pytest_args: Sequence[str] = ()
    torch_build: str | None = None
    every: int = 1

    def new_matrix(self) -> Matrix:
        releases = sort_releases([*self.releases, self.reference])
        m = Matrix(
            suite=self.suite,
            engine=self.target.engine,
            package=self.target.package,
            setting=self.target.setting,
            reference=self.reference,
            releases=releases,
            pytest_args=list(self.pytest_args),
            settings=dict(self.settings),
            torch_build=self.torch_build,
        )
        for i, (rel, role) in enumerate(schedule(self.reference, releases, self.every), 1):
            out = self.run_dir(i, role, rel)
            m.runs.append(Run(index=i, release=rel, role=role, results_dir=out))
        return m

    def run_dir(self, index: int, role: str, release: str) -> str:
        return str(self.results_dir / "runs" / f"{index:02d}-{role}-{_safe(release)}")


def open_matrix(plan: MatrixPlan, *, resume: bool, retry_uninstallable: bool = False) -> Matrix:
    """A new matrix for ``plan``, or (``resume``) the one saved in its results directory, which
    must have been planned for the same suite, engine, reference and releases.
    ``retry_uninstallable``: releases recorded as not installable are asked again."""
    path = plan.results_dir / MATRIX_FILE
    if not resume:
        if path.exists():
            raise ConfigError(
                f"{path} exists: pass --resume to go on with it, or another --results-dir"
            )
        return plan.new_matrix()
    if not path.exists():
        raise ConfigError(f"--resume: {path} does not exist (nothing to resume)")
    m = load_matrix(path)
    fresh = plan.new_matrix()
    for name in ("suite", "engine", "package", "reference", "releases"):
        if getattr(m, name) != getattr(fresh, name):
            raise ConfigError(
                f"--resume: {path} was planned with {name} {getattr(m, name)!r}, this command "
                f"asks for {getattr(fresh, name)!r}"
            )
    if retry_uninstallable:
        for run in m.runs:
            if run.status == "not_installable":
                run.status, run.reason = "pending", None
        m.not_installable = {}
    return m


# --------------------------------------------------------------------------- executing
def _duration(seconds: float) -> str:
    s = round(seconds)
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{sec:02d}s"


def _last_line(log: Path) -> str:
    """The reason a command gave: the last line of its log that is not our ``$ command``."""
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return f"no log ({log})"
    for line in reversed(lines):
        if line.strip() and not line.startswith("$ "):
            return line.strip()
    return f"no reason given (see {log})"


def has_results(run_dir: Path | str) -> bool:
    return Path(run_dir).is_dir() and any(Path(run_dir).rglob(SUMMARY))


def start_failures(run_dir: Path | str) -> dict[str, str]:
    """method -> why its engine did not start, from the run's ``engine-starts.jsonl`` (a
    method the release lacks is refused there, and its items are skipped as NOT EVALUATED)."""
    path = Path(run_dir) / START_LOG
    if not path.is_file():
        return {}
    out: dict[str, str] = {}
    for ev in read_jsonl(path, skip_bad=True):
        if isinstance(ev, dict) and ev.get("event") == "start_failed":
            out.setdefault(str(ev.get("method")), str(ev.get("error") or "no reason recorded"))
    return out


@dataclass
class Executor:
    """Runs one scheduled run at a time for a matrix (``specperf watch matrix`` and ``bisect``
    share it): the release's environment (created once per release), then the suite."""

    matrix: Matrix
    path: Path  # where matrix.json is saved
    target: Target
    python: str = sys.executable
    runner: Runner = run_logged
    say: Say = print
    clock: Callable[[], float] = time.monotonic

    @property
    def base(self) -> Path:
        return self.path.parent

    def save(self) -> None:
        self.matrix.save(self.path)

    def installable(self, release: str) -> str | None:
        """None when the release's environment exists or was made; else why not (one line).
        The answer is kept in the matrix, so a resumed matrix does not ask twice."""
        if release in self.matrix.not_installable:
            return self.matrix.not_installable[release]
        if not self.target.uses_env or release in self._made:
            return None
        log = self.base / "logs" / f"env-{_safe(release)}.log"
        cmd = [self.python, "-m", "specperf.cli", "env", "create", self.target.env_spec(release)]
        if self.matrix.torch_build:
            cmd += ["--torch-build", self.matrix.torch_build]
        if self.runner(cmd, log) != 0:
            why = _last_line(log).removeprefix(ENV_ERROR)
            self.matrix.not_installable[release] = why
            self.save()
            return self.matrix.not_installable[release]
        self._made.add(release)
        return None

    def __post_init__(self) -> None:
        self._made: set[str] = set()

    def execute(self, run: Run, label: str) -> None:
        """Run ``run`` (its status, wall time and reason are set and saved, also when the run
        is interrupted: then it is marked so and the exception goes on)."""
        why = self.installable(run.release)
        if why is not None:
            run.status, run.reason = "not_installable", why
            self.say(f"{label} not installable: {why}")
            self.save()
            return
        out = Path(run.results_dir)
        if out.exists():  # an interrupted run's partial results are kept beside, not reused
            n = 1
            while out.with_name(f"{out.name}.interrupted{n}").exists():
                n += 1
            out.rename(out.with_name(f"{out.name}.interrupted{n}"))
        ref_scratch = self.base / "baselines-reference"
        if run.role == "reference":
            scratch = ref_scratch
            if not any(r.status == "done" for r in self.matrix.runs if r.role == "reference"):
                shutil.rmtree(scratch, ignore_errors=True)  # the first reference run starts it
        else:
            scratch = self.base / "baselines-candidate"
            shutil.rmtree(scratch, ignore_errors=True)
            if ref_scratch.is_dir():
                shutil.copytree(ref_scratch, scratch)
        cmd = pytest_command(
            self.python,
            self.matrix.suite,
            self.target,
            run.release,
            out,
            scratch,
            self.matrix.settings,
            self.matrix.pytest_args,
            update_baselines=run.role == "reference",
        )
        run.started, run.status, run.reason = now_iso(), "interrupted", None
        self.save()
        t0 = self.clock()
        try:
            rc = self.runner(cmd, self.base / "logs" / f"run-{run.index:02d}.log")
        except BaseException:
            run.wall_s, run.finished = self.clock() - t0, now_iso()
            run.reason = "interrupted (--resume runs it again)"
            self.save()
            raise
        run.wall_s, run.finished, run.exit_code = self.clock() - t0, now_iso(), rc
        refused = start_failures(out)
        first = next(iter(refused.items()), None)
        why = f"{first[0]}: {first[1]}" if first else None
        if has_results(out):
            run.status = "done"
            run.reason = None if rc in (0, 1) else f"pytest exit code {rc} (see the run's log)"
        elif rc == 0 and why:  # every selected item skipped: the engine refused each method
            run.status, run.reason = "not_evaluated", f"NOT EVALUATED: {why}"
        else:
            run.status = "failed"
            log = f"logs/run-{run.index:02d}.log"
            run.reason = f"pytest exit code {rc}, no item results (see {log})"
            if why:
                run.reason += f"; engine not started: {why}"
        self.save()


def run_schedule(ex: Executor) -> None:
    """Every pending (or interrupted) run of the matrix, in order, with progress lines: which
    run, release and role, the time it took and an ETA from the runs so far. A reference that
    cannot be installed ends the matrix (nothing could be judged)."""
    m = ex.matrix
    total = len(m.runs)
    for run in m.runs:
        if run.status in ("done", "failed", "not_installable", "not_evaluated"):
            continue
        label = f"[{run.index}/{total}] {m.package} {run.release} ({run.role})"
        ex.say(f"{label} …")
        ex.execute(run, label)
        if run.status == "not_installable" and run.role == "reference":
            raise SpecperfError(
                f"the reference {m.package} {run.release} is not installable: {run.reason}"
            )
        if run.status in ("done", "failed", "not_evaluated"):
            timed = [r.wall_s for r in m.runs if r.wall_s is not None and r.status != "interrupted"]
            left = sum(1 for r in m.runs if r.status in ("pending", "interrupted"))
            eta = _duration(sum(timed) / len(timed) * left) if timed and left else "0m00s"
            state = {"done": "done", "not_evaluated": run.reason}.get(
                run.status, f"FAILED ({run.reason})"
            )
            ex.say(f"{label} {state} in {_duration(run.wall_s or 0)}; {left} left, ETA {eta}")

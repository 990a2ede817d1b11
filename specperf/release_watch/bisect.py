"""Bisect by release: the first release between a good and a bad one that shows a change, by
binary search over the releases in between, every step judged against the good release's runs
with the matrix's judging (matrix_judge) and run by the matrix's executor (matrix_run). The
bisect is a matrix whose reference is the good release, so its ``matrix.json`` holds every run
and cell; ``bisect.json`` holds the answer.

Steps: the good release twice around the bad one (G B G: the bad release must show the change,
and the good runs must agree with each other for an exact comparison; a check that may be
decided by speed runs the good release a third time, so speed is judged against three passes);
then one run per step
(a speed check also re-runs the good release after each step, so the host's drift sits inside
its spread); a release that cannot be installed is skipped and the next one nearest the middle
is tried; at the end the last good and the first bad release are each run once more and must
say the same again. Where skipped releases sit between the two, the answer is an interval that
names them.

What "shows the change" means: a cell selected by ``--check`` (a metric, an item, or
``item:metric``; an item is its key or its item id) whose verdict against the good runs is
``fail`` or ``changed`` (matrix_judge).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from specperf import verdict
from specperf.config import load_suite
from specperf.engines import get_engine_class
from specperf.errors import ConfigError, SpecperfError
from specperf.release_watch.matrix_judge import (
    ENGINE_WIDE,
    Reference,
    is_exact,
    judge_matrix,
    judge_run,
)
from specperf.release_watch.matrix_model import MATRIX_FILE, Matrix, Run, Verdict
from specperf.release_watch.matrix_run import (
    Executor,
    MatrixPlan,
    has_results,
    releases_between,
    sort_releases,
)
from specperf.release_watch.running import Runner, run_logged
from specperf.release_watch.targets import Target
from specperf.results import write_json_atomic

BISECT_FILE = "bisect.json"
SHOWS = ("fail", "changed")


# --------------------------------------------------------------------------- the check
@dataclass(frozen=True)
class CheckSpec:
    """``--check``: which cells decide whether a release shows the change."""

    text: str
    item: str | None = None
    metric: str | None = None

    @classmethod
    def parse(cls, text: str, metrics: Sequence[str]) -> CheckSpec:
        if ":" in text:
            item, _, metric = text.rpartition(":")
            if not item or not metric:
                raise ConfigError(f"--check {text!r}: expected METRIC, ITEM or ITEM:METRIC")
            return cls(text, item, metric)
        if text in metrics:
            return cls(text, None, text)
        return cls(text, text, None)

    def matches(self, key: str, metric: str, item_ids: Mapping[str, str]) -> bool:
        if self.metric is not None and metric != self.metric:
            return False
        return self.item is None or self.item in (key, item_ids.get(key))

    @property
    def speed(self) -> bool:
        """True when the check may be decided by a speed (then the good release is re-run
        around each step): it names no exact metric."""
        return self.metric is None or not is_exact(self.metric)


class BisectStep(BaseModel):
    release: str
    status: str  # good | bad | not installable | not evaluated
    reason: str = ""


class BisectResult(BaseModel):
    """``bisect.json``: the answer and how it was reached."""

    package: str
    engine: str
    suite: str
    good: str
    bad: str
    check: str
    status: str  # found | interval | not confirmed | no change | error
    last_good: str | None = None
    first_bad: str | None = None
    # not installable (or nothing evaluated), inside the answer
    skipped: list[str] = Field(default_factory=list)
    runs: int = 0  # suite runs the bisect needed
    steps: list[BisectStep] = Field(default_factory=list)
    evidence: list[str] = Field(default_factory=list)  # the first bad release's cells
    compare_url: str | None = None
    message: str = ""

    def lines(self) -> list[str]:
        out = [self.message, f"runs: {self.runs}"]
        if self.evidence:
            out += [f"  {e}" for e in self.evidence]
        if self.compare_url:
            out.append(f"upstream: {self.compare_url}")
        return out


def pair_from_matrix(m: Matrix, check: str) -> tuple[str, str]:
    """(good, bad) from a matrix: the first release whose cells selected by ``check`` changed
    against the previous release (``fail`` or ``changed``), and that previous release."""
    metrics = sorted({c.metric for c in m.cells})
    spec = CheckSpec.parse(check, metrics)
    prev: str | None = None
    for rel in m.releases:
        cells = [c for c in m.cells if c.release == rel and spec.matches(c.item, c.metric, {})]
        if not cells:
            continue
        if prev is not None and any(
            c.vs_previous is not None and c.vs_previous.status in SHOWS for c in cells
        ):
            return prev, rel
        prev = rel
    raise ConfigError(
        f"--check {check!r}: no release of the matrix changed against the previous one on it; "
        "give --good and --bad"
    )


def upstream_compare(suite: str, engine: str, package: str, old: str, new: str) -> str | None:
    """The engine module's link to the upstream changes between two releases (an engine
    class's ``upstream_compare(package, old, new)``; None where it has none)."""
    kind = load_suite(suite).engine(engine).kind
    fn: Callable[[str, str, str], str | None] | None = getattr(
        get_engine_class(kind), "upstream_compare", None
    )
    return fn(package, old, new) if fn else None


# --------------------------------------------------------------------------- the search
@dataclass
class Bisector:
    target: Target
    suite: str
    good: str
    bad: str
    check: str
    releases: list[str]  # every release of the package (the version source's list)
    results_dir: Path
    settings: Mapping[str, str] = field(default_factory=dict)
    pytest_args: Sequence[str] = ()
    torch_build: str | None = None
    pre: bool = False
    python: str | None = None
    runner: Runner = run_logged
    say: Callable[[str], None] = print

    def __post_init__(self) -> None:
        between = releases_between(
            self.releases, self.good, self.bad, pre=self.pre, flags=("--good", "--bad")
        )
        self.between = [r for r in between if r not in (self.good, self.bad)]
        plan = MatrixPlan(
            self.target,
            self.suite,
            [self.bad],
            self.good,
            self.results_dir,
            self.settings,
            self.pytest_args,
            self.torch_build,
        )
        self.matrix = Matrix(
            suite=self.suite,
            engine=self.target.engine,
            package=self.target.package,
            setting=self.target.setting,
            reference=self.good,
            releases=[self.good, self.bad],
            pytest_args=list(self.pytest_args),
            settings=dict(self.settings),
            torch_build=self.torch_build,
        )
        self.plan = plan
        kw: dict[str, Any] = {"runner": self.runner, "say": self.say}
        if self.python:
            kw["python"] = self.python
        self.ex = Executor(self.matrix, self.results_dir / MATRIX_FILE, self.target, **kw)
        self.result = BisectResult(
            package=self.target.package,
            engine=self.target.engine,
            suite=self.suite,
            good=self.good,
            bad=self.bad,
            check=self.check,
            status="error",
        )
        self.spec: CheckSpec | None = None
        self.ref: Reference | None = None

    # -- running
    def _run(self, release: str) -> Run:
        m = self.matrix
        if release not in m.releases:
            m.releases = sort_releases([*m.releases, release])
        role = "reference" if release == self.good else "candidate"
        i = len(m.runs) + 1
        run = Run(
            index=i, release=release, role=role, results_dir=self.plan.run_dir(i, role, release)
        )
        m.runs.append(run)
        self.ex.execute(run, f"[bisect run {i}] {m.package} {release} ({role})")
        if run.status in ("done", "failed"):
            self.result.runs += 1
        if run.status == "failed":
            raise SpecperfError(f"{m.package} {release}: the suite run failed: {run.reason}")
        if release == self.good and run.status == "done":
            self.ref = None  # the good runs changed: rebuild the comparand
        return run

    def _reference(self) -> Reference:
        if self.ref is None:
            dirs = [Path(r.results_dir) for r in self.matrix.done(self.good, "reference")]
            self.ref = Reference.from_dirs(self.good, [d for d in dirs if has_results(d)])
        return self.ref

    def _item_ids(self, run: Run) -> dict[str, str]:
        return {k: r.item_id for k, r in verdict.load_results([Path(run.results_dir)]).items()}

    def shows(self, run: Run) -> tuple[bool, list[str]]:
        """Whether ``run`` shows the change against the good runs, and the cells that say so."""
        ref = self._reference()
        verdicts, _ = judge_run(ref, Path(run.results_dir))
        if self.spec is None:
            metrics = sorted({k[1] for k in verdicts})
            self.spec = CheckSpec.parse(self.check, metrics)
        ids = self._item_ids(run)
        picked: dict[tuple[str, str], Verdict] = {
            k: v for k, v in verdicts.items() if self.spec.matches(k[0], k[1], ids)
        }
        if not picked:
            raise ConfigError(
                f"--check {self.check!r} matches no cell of {run.release}'s results (items: "
                f"{', '.join(sorted({k[0] for k in verdicts}))}; metrics: "
                f"{', '.join(sorted({k[1] for k in verdicts}))})"
            )
        hits = [
            f"{k[0]}: {k[1]} {v.status}" + ("" if v.delta is None else f" {v.delta:+.1%}")
            for k, v in sorted(picked.items())
            if v.status in SHOWS
        ]
        return bool(hits), hits

    def _step(self, release: str) -> bool | None:
        """Run ``release``; True: it shows the change, False: it does not, None: not
        installable, or nothing of it could be evaluated (skipped like an uninstallable one)."""
        run = self._run(release)
        if run.status in ("not_installable", "not_evaluated"):
            state = run.status.replace("_", " ")
            self.result.steps.append(
                BisectStep(release=release, status=state, reason=run.reason or "")
            )
            return None
        if self.spec is not None and self.spec.speed:
            self._run(self.good)
        bad, hits = self.shows(run)
        self.result.steps.append(
            BisectStep(release=release, status="bad" if bad else "good", reason="; ".join(hits))
        )
        self.say(f"bisect: {self.target.package} {release} is {'BAD' if bad else 'good'}")
        return bad

    def save(self) -> None:
        self.ex.save()
        write_json_atomic(self.results_dir / BISECT_FILE, self.result.model_dump(mode="json"))

    def bisect(self) -> BisectResult:
        res = self.result
        pkg = self.target.package
        try:
            for which, release in (("good", self.good), ("bad", self.bad)):
                run = self._run(release)
                if run.status in ("not_installable", "not_evaluated"):
                    state = run.status.replace("_", " ")
                    res.message = f"the {which} release {pkg} {release} is {state}: {run.reason}"
                    return res
                if which == "bad":
                    bad_run = run
            self._run(self.good)
            ref = self._reference()
            metrics = {k[1] for k in ref.values} | {ENGINE_WIDE}
            self.spec = CheckSpec.parse(self.check, sorted(metrics))
            if self.spec.speed:  # a third good run: a speed gate needs three starts
                self._run(self.good)
            bad, hits = self.shows(bad_run)
            if not bad:
                res.status = "no change"
                res.message = (
                    f"{pkg} {self.bad} does not show a change of {self.check!r} against "
                    f"{self.good}: nothing to bisect"
                )
                return res
            lo, hi = -1, len(self.between)  # indices into between: lo good, hi bad
            skipped: set[int] = set()
            evidence = hits
            while True:
                left = [i for i in range(lo + 1, hi) if i not in skipped]
                if not left:
                    break
                middle = (lo + hi) / 2
                i = min(left, key=lambda j: (abs(j - middle), j))
                shown = self._step(self.between[i])
                if shown is None:
                    skipped.add(i)
                elif shown:
                    hi = i
                    evidence = [s for s in res.steps[-1].reason.split("; ") if s]
                else:
                    lo = i
            last_good = self.good if lo < 0 else self.between[lo]
            first_bad = self.bad if hi >= len(self.between) else self.between[hi]
            res.last_good, res.first_bad = last_good, first_bad
            res.skipped = [self.between[i] for i in range(lo + 1, hi)]
            res.evidence = evidence
            # confirm: one more run of each neighbour says the same again
            again_good = self.shows(self._run(last_good))[0]
            again_bad = self.shows(self._run(first_bad))[0]
            res.compare_url = upstream_compare(
                self.suite, self.target.engine, pkg, last_good, first_bad
            )
            if again_good or not again_bad:
                res.status = "not confirmed"
                res.message = (
                    f"not confirmed: re-running {pkg} {last_good} "
                    f"{'showed' if again_good else 'did not show'} the change and {first_bad} "
                    f"{'showed' if again_bad else 'did not show'} it; the change of "
                    f"{self.check!r} is not repeatable between these releases"
                )
            elif res.skipped:
                res.status = "interval"
                res.message = (
                    f"{self.check!r} changed after {pkg} {last_good}, by {first_bad}: the first "
                    f"bad release is one of {', '.join(res.skipped)}, {first_bad} "
                    f"({', '.join(res.skipped)} could not be installed or evaluated)"
                )
            else:
                res.status = "found"
                res.message = (
                    f"first bad release: {pkg} {first_bad} (last good {last_good}); "
                    f"{self.check!r} changed, confirmed by a re-run of both"
                )
            return res
        finally:
            try:
                judge_matrix(self.matrix)
            finally:
                self.save()


def exit_code(res: BisectResult) -> int:
    """0: a first bad release (or interval) found and confirmed; 2: otherwise."""
    return 0 if res.status in ("found", "interval") else 2


__all__ = ["BISECT_FILE", "BisectResult", "Bisector", "CheckSpec", "exit_code"]

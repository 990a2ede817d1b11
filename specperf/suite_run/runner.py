"""``SuiteRun``: the worker's view of a suite run. It owns the engine pool, measures an item
(engine from the pool, ``repeat`` starts or repeats, the request count sized to the item's
minimum duration) and judges it (checks against the baseline and the item's own same-run rules,
the baseline update when asked, the outcome). The results directory's layout:
``specperf.suite_run``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import shlex
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from specperf import baselines as bl
from specperf import datasets, environment
from specperf import verdict as vd
from specperf.config import Item
from specperf.engines.base import Devices, EngineSpec
from specperf.errors import EngineStartError, SpecperfError
from specperf.fileio import write_text_atomic
from specperf.measure import measure as measure_run
from specperf.pool import START_LOG, EnginePool, one_at_a_time
from specperf.suite_run.baseline_update import update_baseline
from specperf.suite_run.options import UPDATE_MODES, ItemRun, RunOptions
from specperf.suite_run.sizing import keep_sizing_start, with_requests
from specperf.suite_run.summary import write_item_summary
from specperf.workload import sizing

REPEAT_SUMMARY = "summary.repeat.json"


class SuiteRun:
    """The worker's view of a suite run: owns the engine pool and writes results."""

    def __init__(self, opts: RunOptions, log: Callable[[str], None] | None = None) -> None:
        if opts.repeat < 1:
            raise SpecperfError(f"--repeat {opts.repeat}: must be >= 1")
        if opts.update is not None and opts.update not in UPDATE_MODES:
            raise SpecperfError(
                f"--update-baselines={opts.update}: one of {', '.join(UPDATE_MODES)}"
            )
        self.opts = opts
        self.suite = opts.suite
        self.results_dir = Path(opts.results_dir)
        self.results_dir.mkdir(parents=True, exist_ok=True)
        self.log = log
        self.pool = EnginePool(
            opts.devices, self.results_dir / "engines", start_log=self.results_dir / START_LOG
        )
        self._start_failures: dict[EngineSpec, str] = {}
        self.write_snapshot()

    # ------------------------------------------------------------------ files
    @property
    def baseline_file(self) -> Path:
        return bl.baseline_path(
            self.opts.baselines_dir, self.opts.hardware_profile, self.suite.baseline_file
        )

    @functools.cached_property
    def levels(self) -> vd.AlphaSplit:
        """Per-check levels: the run's false-alarm budget split over the suite's gated checks
        (the whole matrix, so a filtered run decides exactly as the full one)."""
        return vd.suite_levels(self.suite)

    def write_snapshot(self) -> None:
        snap = self.suite.to_json()
        snap["hardware_profile"] = self.opts.hardware_profile
        snap["baseline_folder"] = self.suite.baseline_file
        snap["baselines_path"] = str(self.baseline_file)
        snap["repeat"] = self.opts.repeat
        snap["alpha"] = dataclasses.asdict(self.levels)
        if self.opts.selected is not None:
            snap["selected"] = sorted(self.opts.selected)
        write_text_atomic(self.results_dir / vd.SUITE_SNAPSHOT, json.dumps(snap, indent=2) + "\n")

    def progress_line(self, text: str) -> None:
        line = f"[{time.strftime('%H:%M:%S')}] {self.opts.devices.worker}: {text}"
        with (self.results_dir / "progress.log").open("a", encoding="utf-8") as fh:
            fh.write(line + "\n")
        if self.log:
            self.log(line)

    # ------------------------------------------------------------------ measuring
    def engine_for(self, item: Item) -> Any:
        if item.spec in self._start_failures:
            raise EngineStartError(
                f"{item.id}: engine failed to start earlier in this session: "
                f"{self._start_failures[item.spec]}"
            )
        try:
            return self.pool.get(item.spec, item.engine.startup_timeout_s)
        except EngineStartError as exc:
            self._start_failures[item.spec] = str(exc).splitlines()[0][:300]
            raise

    def measure(
        self, item: Item, wrap: Callable[[Callable[[], Any]], Any] | None = None
    ) -> ItemRun:
        """Start (or reuse) the engine, measure ``repeat`` times, write the item's results.
        ``wrap`` runs the measuring callable (the plugin passes pytest-benchmark's pedantic).
        The request count is the baseline entry's where it fixes one, else the suite's, grown
        when its first start was shorter than the item's minimum duration
        (``specperf.workload.sizing`` says why)."""
        name, path = item.key.dataset, item.dataset.path
        if path and name not in datasets.list_datasets():
            dataset = datasets.load_dataset(path, tier=item.tier)  # a custom JSONL set
        else:
            dataset = datasets.load_dataset(name, tier=item.tier, path=path)
        engine = self.engine_for(item)
        # e.g. speculative transformers paths run at batch size 1: refuse before measuring
        engine.client().check_workload(item.workload)
        record = engine.record()
        fingerprint = item.fingerprint_base()
        fingerprint["dataset_version"] = dataset.version
        item, fingerprint, size = self._fixed_size(item, fingerprint)
        may_grow = (
            size.source == "suite" and item.workload.size_to_min_duration and self._sizes_items()
        )
        item_dir = self.results_dir / item.id
        summaries: list[dict[str, Any]] = []
        environment = _environment(
            self.opts.hardware_profile, self.opts.devices, self.opts.hardware_profile_overridden
        )

        def run_once(k: int) -> dict[str, Any]:
            out = item_dir if k == 1 else item_dir / f"repeat-{k}"
            info = self.run_info(item, fingerprint, k)
            info["sizing"] = size.to_json()
            self.progress_line(f"{item.id}: repeat {k}/{self.opts.repeat} started")
            with one_at_a_time(self.opts.one_at_a_time):
                started = time.time()
                summary = measure_run(
                    engine.client(),
                    dataset,
                    item.sampling,
                    item.workload,
                    out,
                    run_info=info,
                    engine_record=record,
                    environment=environment,
                    progress=self._progress(item, k),
                )
                summary["wall_clock"] = {"started": started, "finished": time.time()}
            if k > 1:
                os.replace(out / vd.SUMMARY, out / REPEAT_SUMMARY)
            return summary

        def grow(first: dict[str, Any]) -> bool:
            """Size the item from its too-short first start; True when it was resized."""
            nonlocal item, fingerprint, size
            wl = item.workload
            if first.get("engine_died") or first.get("failed"):
                return False
            n = sizing.grown_count(
                wl.num_requests, first.get("duration_s"), wl.min_duration_s, wl.item_deadline_s
            )
            if n is None:
                return False
            keep_sizing_start(item_dir)
            size = sizing.Sizing(wl.num_requests, n, "measured", first.get("duration_s"))
            item = with_requests(item, n)
            fingerprint["num_requests"] = n
            self.progress_line(
                f"{item.id}: sized to {size.describe()} < {sizing.SIZE_TARGET:g} x the minimum "
                f"{wl.min_duration_s:g} s; measuring again (the short start is kept in "
                f"{item_dir / sizing.SIZING_DIR})"
            )
            return True

        def run_all() -> None:
            nonlocal engine, record
            for k in range(1, self.opts.repeat + 1):
                if k > 1 and self.opts.restart_between_repeats:
                    self.pool.release(f"fresh engine for repeat {k}")
                    if self.opts.between_starts is not None:
                        self.opts.between_starts(k)
                    engine = self.engine_for(item)
                    record = engine.record()  # this repeat's engine: its pid, log, start-up
                s = run_once(k)
                if k == 1 and may_grow and engine.is_alive() and grow(s):
                    s = run_once(k)
                summaries.append(s)
                if s.get("engine_died") or not engine.is_alive():
                    self.pool.release("engine died during the item")
                    break

        (wrap or (lambda fn: fn()))(run_all)
        summary = write_item_summary(
            item_dir, summaries, self.metrics_of_interest(), self.opts.restart_between_repeats
        )
        result = vd.ItemResult(summary, item_dir)
        return ItemRun(item, item_dir, result, summaries, summary.get("engine_version"))

    def _fixed_size(
        self, item: Item, fingerprint: dict[str, Any]
    ) -> tuple[Item, dict[str, Any], sizing.Sizing]:
        """The item as its baseline entry fixes its request count (unchanged when none does).
        With ``[workload] size_to_min_duration = false`` the suite's count is the count every
        run sends (a fitted EAGLE3 head covers exactly its prompts): an entry of another count
        fixes nothing and is stale."""
        n0 = item.workload.num_requests
        if not item.workload.size_to_min_duration:
            return item, fingerprint, sizing.Sizing(n0, n0, "suite")
        entry = bl.load_baselines(self.baseline_file).get(item.key)
        fixed = sizing.count_from_entry(entry.fingerprint if entry else None, fingerprint, n0)
        if fixed is None or fixed == n0:
            return item, fingerprint, sizing.Sizing(n0, n0, "baseline" if fixed else "suite")
        size = sizing.Sizing(n0, fixed, "baseline")
        self.progress_line(f"{item.id}: {size.describe()}")
        return with_requests(item, fixed), {**fingerprint, "num_requests": fixed}, size

    def _sizes_items(self) -> bool:
        """Sizing costs engine time: done only where the suite gates a hardware-bound metric
        (speed, latency; nothing else reads an item's duration) and the item may be sized."""
        return any(p.hardware_bound and p.gate != "never" for p in self.suite.metrics.values())

    def run_info(self, item: Item, fingerprint: dict[str, Any], repeat: int) -> dict[str, Any]:
        spec = item.spec
        return {
            "key": item.key.as_str(),
            "key_fields": item.key.to_json(),
            "item_id": item.id,
            "suite": self.suite.name,
            "engine": spec.kind,
            "engine_label": spec.label,
            "engine_name": item.key.engine,
            "method": spec.method,
            "method_name": item.key.method,
            "num_speculative_tokens": spec.num_speculative_tokens,
            "topology": spec.topology(),
            "model": item.key.model,
            "model_path": spec.model,
            "dataset": item.key.dataset,
            "tier": item.tier,
            "concurrency": item.workload.concurrency,
            "sampling": item.sampling.fingerprint(),
            "hardware_profile": self.opts.hardware_profile,
            "fingerprint": fingerprint,
            "spec_digest": spec.digest(),
            "worker": self.opts.devices.worker,
            "devices": {"gpus": list(self.opts.devices.gpus), "cpus": list(self.opts.devices.cpus)},
            "repeat": repeat,
            "repeats": self.opts.repeat,
        }

    def _progress(self, item: Item, k: int) -> Callable[[int, int], None]:
        n = item.workload.num_requests
        every = self.opts.progress_every or max(10, -(-n // 10))  # ~10 lines for long items
        t0 = time.monotonic()

        def cb(done: int, total: int) -> None:
            if done == total or done % every == 0:
                rate = done / max(time.monotonic() - t0, 1e-9)
                self.progress_line(
                    f"{item.id} (repeat {k}): {done}/{total} requests, {rate:.2f} req/s"
                )

        return cb

    def metrics_of_interest(self) -> list[str]:
        names = list(self.suite.metrics)
        for rule in self.suite.rules:
            if rule.metric not in names and rule.metric != "speedup":
                names.append(rule.metric)
        return names

    # ------------------------------------------------------------------ judging
    def judge(self, run: ItemRun) -> ItemRun:
        """Checks against the baseline and the item's own same-run rules, the baseline update
        when asked, and the outcome. Cross-engine rules wait for the end of the run."""
        bfile = bl.load_baselines(self.baseline_file)
        entry = bfile.get(run.item.key)
        missing = (
            None
            if self.baseline_file.exists()
            else vd.no_baseline_reason(self.opts.hardware_profile, self.baseline_file)
        )
        checks = vd.evaluate_item(
            run.result,
            entry,
            self.suite.metrics,
            hardware_profile=self.opts.hardware_profile,
            known_issues=self.suite.known_issues,
            max_failed_fraction=self.suite.workload.max_failed_fraction,
            alpha=self.levels.item,
            missing_reason=missing,
            siblings=vd.config_siblings(bfile, run.item.key),
        )
        results = vd.load_results([self.results_dir])
        rules = list(self.suite.rules) + list(bfile.rules)
        checks += vd.evaluate_rules(
            rules,
            results,
            subject=run.item.key,
            kinds=("speedup", "floor", "ceiling", "guard"),
            known_issues=self.suite.known_issues,
            selected=self.opts.selected,
        )
        run.updated = update_baseline(
            run, entry, checks, self.opts, self.baseline_file, self.progress_line
        )
        if run.updated:
            checks = [
                dataclasses.replace(c, status="info", reason=f"{c.status}; baseline written now")
                if c.status in ("missing", "stale")
                else c
                for c in checks
            ]
            checks.append(
                vd.Check(
                    run.item.key.as_str(),
                    "baseline",
                    "info",
                    item=run.item.id,
                    reason=f"updated ({self.opts.update}) in {self.baseline_file}",
                )
            )
        if not run.updated:  # green must mean something was judged (verdict.outcome)
            checks += vd.unjudged_items(checks, [run.item.key.as_str()])
        run.checks = checks
        run.outcome = vd.outcome(
            checks,
            strict=self.opts.strict,
            updated=run.updated,
            update_command=self.update_command(run.item),
        )
        vd.write_verdicts(self.results_dir / vd.VERDICTS, checks)
        return run

    def update_command(self, item: Item) -> str:
        return f"{self.opts.rerun_hint} -k {shlex.quote(item.id)} --update-baselines=missing"

    def release_engine(self, reason: str) -> None:
        """Stop the worker's engine now (a later item that needs one starts it again)."""
        self.pool.release(reason)

    def close(self) -> None:
        self.pool.close()


def _environment(profile: str, devices: Devices, overridden: bool = False) -> dict[str, Any]:
    """The environment record (specperf.environment) of this worker's devices, under the
    run's profile (detected once per worker, or given); ``overridden``: given by the user."""
    env = environment.environment_record(
        hardware_profile_override=profile, gpus=devices.gpus, cpus=devices.cpus
    )
    env["hardware_profile_overridden"] = overridden
    env["worker"] = devices.worker
    return env

"""A suite run on one worker, without pytest: engine from the pool, measurement (with repeats),
the item's results on disk, its verdict and the baseline update. The pytest plugin is thin glue
around ``SuiteRun``, so everything here is testable with plain function calls. "Run", not
"session": a pytest session is the process pytest drives; under xdist each worker's session
holds one ``SuiteRun``, its part of the suite run.

Results directory layout (read by ``specperf verdict``, ``specperf report`` and ``merge``):
  suite.json            resolved policies, rules and quarantines of the suite (a snapshot)
  engine-starts.jsonl   one line per engine start/stop (worker, spec digest, pid, devices)
  progress.log          progress lines of long items (also printed when not under xdist)
  verdicts.jsonl        every check of every item, appended as items finish
  verdict.json          the final verdict of the run (written by the controller)
  engines/              engine logs
  <item-id>/summary.json, requests.jsonl    (repeat 1; figures are medians over repeats)
  <item-id>/repeat-<k>/summary.repeat.json, requests.jsonl    (repeats 2..N)
  <item-id>/sizing/summary.sizing.json, requests.jsonl    (a too-short first start, when the
                        item was sized again: specperf.workload.sizing; not an item start)

Modules by job: ``options`` (``RunOptions``, ``ItemRun``), ``runner`` (``SuiteRun``: measure and
judge an item), ``sizing`` (an item measured again at its grown count), ``summary`` (the item's
summary.json over repeats), ``baseline_update`` (``--update-baselines``), ``rules`` (the checks
over every item of the run, at its end).
"""

from specperf.suite_run.options import UPDATE_MODES, ItemRun, RunOptions
from specperf.suite_run.rules import merge_rule_checks, run_level_checks
from specperf.suite_run.runner import SuiteRun

__all__ = [
    "UPDATE_MODES",
    "ItemRun",
    "RunOptions",
    "SuiteRun",
    "merge_rule_checks",
    "run_level_checks",
]

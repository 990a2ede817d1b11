"""The perf matrix: one test per item of the suite (``--suite``, default cpu-tiny), i.e. per
(model, engine, method, dataset, concurrency, sampling), with ids like
``vllm-eagle3-humaneval-c16``. Run it with ``pytest -m perf``.

What every item must meet, in the order it is checked (specperf.verdict evaluates each; the
numbers live in the suite file and the baseline file, never here):

| subject                     | expectation                                               | else   |
|-----------------------------|-----------------------------------------------------------|--------|
| engine                      | starts, and stays up for the whole item                   | fail   |
| requests                    | failed <= the suite's max_failed_fraction (default 0)     | fail   |
| baseline entry              | exists for the key, with the same fingerprint             | skip * |
| output tokens               | within tolerance of the baseline (else throughput is not  | fail** |
|                             | compared, and the table says so)                          |        |
| MAL, acceptance rate        | no drop of `tolerance` or more vs the baseline            | fail   |
| output tok/s (TTFT, TPOT)   | no drop (rise) of `tolerance` or more, median of --repeat | fail***|
| speedup over native         | >= the suite's floor, same run, same engine and GPU       | fail   |
| bounds and quality guards   | floors/ceilings, greedy match vs native, no degeneration  | fail   |
| a known, quarantined issue  | fails as expected until its expiry                        | xfail  |

\\*   a failure with --strict-baselines; the skip message gives the command that creates it.
\\**  when the suite gates output length (cpu-tiny does; GPU suites report it).
\\*** gated per metric policy: "always", "measured" (only by the per-start statistics, against
     a baseline of >= 3 starts from >= 2 days of this profile and CPU), or "never" (reported
     only). Cross-engine rules are judged once all
     items are done, in the end-of-session table.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.perf


def test_item(specperf_item, specperf, benchmark):
    run = specperf.measure(specperf_item, benchmark=benchmark)
    specperf.conclude(run)

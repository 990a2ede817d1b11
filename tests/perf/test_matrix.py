"""The perf matrix: one test per item of the suite (``--suite``, default cpu-tiny), i.e. per
(model, engine, method, dataset, concurrency, sampling), with ids like
``vllm-eagle3-humaneval-c16``. Run it with ``pytest -m perf``.

What every item must meet, in the order it is checked (specperf.verdict evaluates each; the
numbers live in the suite file and the baseline file, never here):

| subject                     | expectation                                               | else   |
|-----------------------------|-----------------------------------------------------------|--------|
| engine                      | starts, and stays up for the whole item                   | fail   |
| requests                    | failed <= the suite's max_failed_fraction (default 0)     | fail   |
| baseline entry              | exists for the key (this profile, measured)               | skip * |
| output tokens               | within tolerance of the baseline (else throughput is not  | fail** |
|                             | compared, and the table says so)                          |        |
| MAL, acceptance rate        | no drop of `tolerance` or more vs the baseline            | fail   |
| output tok/s (TTFT, TPOT)   | no drop (rise) of `tolerance` or more vs the baseline     | fail***|
| speedup over native         | >= the suite's floor, same run, same engine and GPU       | fail   |
| bounds and quality guards   | floors/ceilings, greedy match vs native, no degeneration  | fail   |
| something judged the item   | an armed baseline gate or a same-run rule                 | fail   |
| a known, quarantined issue  | fails as expected until its expiry                        | xfail  |

\\*   a failure with --strict-baselines; the skip message gives the command that creates it.
\\**  when the suite gates output length (cpu-tiny does; GPU suites report it).
\\*** every baseline comparison is decided by the per-start statistics (docs/verdict.md) and
     only once the baseline has the evidence: >= 3 engine starts; for speeds and latencies
     also starts from >= 2 windows 12 h apart and >= 3 passes of this profile and CPU. With
     less, the metric is reported, never gated. Cross-engine rules are judged once all items
     are done, in the end-of-session table.
"""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.perf, pytest.mark.timing]


def test_item(specperf_item, specperf, benchmark):
    run = specperf.measure(specperf_item, benchmark=benchmark)
    outcome = specperf.conclude(run)  # a fail, skip or xfail ends the test here, with its lines
    assert outcome.status == "pass", "\n".join(outcome.lines)

"""``specperf gpu-night``: the GPU suite on a CUDA box, end to end. It builds random-weight
model configs of real shapes, fits the suite's EAGLE3 head on that machine, runs ``pytest -m perf
-n 1`` with the h200-transformers suite (a pass that writes the baseline and/or a pass that checks
against it), samples NVML beside it, and reports the figures.

    specperf gpu-night --out OUT                 # fit, then both passes (update, then check)
    specperf gpu-night --out OUT --passes update # one pass
    specperf gpu-night --out OUT --passes fit    # the head fit alone (a step of its own)
    specperf gpu-night --out OUT --shapes tiny --device cpu   # dry run without a GPU
    specperf gpu-night --out OUT --passes check --eagle3-head random -- --method eagle3
                                                 # the MAL gate must FAIL (see below)

Where specperf is not installed (a bare CUDA image), ``python -m specperf.testkit.gpu_night``
from the repository root is the same command. The suite repository (its
``tests/perf`` and ``baselines/``) is ``--root``: by default the checkout this package is imported
from, else the working directory; engines are started with that checkout first on PYTHONPATH.

EAGLE3's head is fitted to the random target first (``python -m specperf.testkit.eagle3_fit.cli
--suite …``: on the engine's own path, deterministic, cached under the models folder by its recipe
digest; OUT/fit.json, OUT/fit.log) and handed to the suite with its identity
(``fit:<name>@<digest>``). The head covers exactly the measured prompts of the suite's request
count, which the suite pins (``[workload] size_to_min_duration = false``), so the served MAL equals
the fit-time MAL whatever the machine: a ``FIT-MAL`` line per EAGLE3 item compares them start by
start. ``--passes fit`` stops after the fit: on a host where fit + check would not end inside one
device call, run ``--passes fit`` and then ``--passes check`` on the same machine (the second finds
the head in its cache, the first leaves the compile cache warm). Each step prints ``STEP <name>:
<seconds> s``. ``--eagle3-head random`` swaps in a random head of the same shape UNDER THE FITTED
HEAD'S IDENTITY — a deliberate regression (an EAGLE3 that accepts nothing), which a check against a
baseline of the fitted head must fail on MAL.

Ends with one ``VERDICT <pass> <item>: PASS|FAIL|…`` line per item (paste them in the review:
docs/transformers.md says when). Writes OUT/gpu_run.json (everything), OUT/pytest-<pass>.log,
the baseline file it wrote and OUT/results.tar.gz (every item's summary.json, requests.jsonl,
engine logs), and ``host`` (hostname, boot id, GPU UUIDs: which machine this was); prints the
tables
(``--markdown OUT/gpu_run.json`` prints them again from a saved run).

Figures reported per item: output tok/s, TPOT/TTFT p50, decode tok/s p50, MAL; for EAGLE3 the
per-step cost split (draft phase and verify phase seconds per verify step, from the engine's
counters) against native's per-token step (TPOT p50); native's share of the HBM roofline
(roofline tok/s = HBM bandwidth / bf16 weight bytes; the bandwidth is the GPU's datasheet figure,
4.8 TB/s for an H200, 3.35 for an H100 SXM, or --hbm-tb-s); NVML per item (clocks, power,
temperature, throttle reasons, memory) from samples inside each item's window.

Modules by job: ``cli`` (options, the steps in order), ``models`` (the shape configs), ``head``
(the EAGLE3 fit and the random-head swap), ``passes`` (a pytest pass, baseline annotation),
``figures`` and ``verdicts`` (the report), ``hardware`` (GPU bandwidth, host identity),
``suite`` (the suite repository and how its commands run).
"""

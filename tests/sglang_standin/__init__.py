"""A stand-in for an SGLang server (SGLang cannot be served on this project's CPUs).

It emits what SGLang's own source defines, per version profile (file and release cited in
``server.py``), so specperf's SGLang engine can be tested for readiness, counter deltas and the
per-request fallback. Never part of the product path (``specperf/`` does not import it).
"""

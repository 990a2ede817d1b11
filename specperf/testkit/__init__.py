"""Test models and head fitting: tooling, not the product.

``specperf.testkit.models`` builds the tiny random-weight test models (a Qwen3 target, its
tokenizer and EAGLE3 head, a DFlash draft, a Qwen3-Next MTP target); ``specperf.testkit.eagle3_fit``
fits an EAGLE3 head to a target (the tiny one on CPU, or a suite's target on its engine path).
The product chain imports neither, except ``specperf.pool``, which resolves ``tiny:`` model names
lazily (pyproject.toml's import contracts, docs/architecture.md). The old homes
``specperf.testmodels`` and ``specperf.eagle3.fit`` re-export both, ``python -m`` included.
"""

"""Test models and head fitting: tooling, not the product.

``specperf.testkit.models`` builds the tiny random-weight test models (a Qwen3 target, its
tokenizer and EAGLE3 head, a DFlash draft, a Qwen3-Next MTP target); ``specperf.testkit.eagle3_fit``
fits an EAGLE3 head to a target (the tiny one on CPU, or a suite's target on its engine path).
The product imports no testkit module (pyproject.toml's import contracts): it finds the
``tiny:`` model source (``tiny_source``) and the ``model`` and ``gpu-night`` subcommands
(``commands``) through the entry points pyproject.toml declares.
"""

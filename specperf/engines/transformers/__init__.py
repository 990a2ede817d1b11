"""The transformers engine: a Hugging Face model served by specperf's own server, one module per
job. Nothing is imported here, so the EAGLE3 model code (``eagle3/``) loads without the engine.

* ``engine``: ``TransformersEngine`` (kind ``transformers``), its client and ``detect``.
* ``server``: ``python -m specperf.engines.transformers.server``, the HTTP side and ``main``;
  ``protocol`` (chat body → request, detokenising), ``worker`` (the thread owning the model),
  ``startup`` (model loading, backend choice, the start-up check).
* ``backend``, ``generate``, ``eagle3_backend``: the generation paths; ``decode_loop``: native
  greedy batch-1 decoding without ``generate()``'s per-token host work.
* ``counters``: per-step counters; ``fast_path``: the compiled-vs-eager start-up check.
* ``eagle3``: our EAGLE3 (config, checkpoint, head, target runner, sampling, speculation).
"""

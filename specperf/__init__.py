"""specperf: performance regression suite for speculative decoding in LLM serving."""

__version__ = "0.1.0"

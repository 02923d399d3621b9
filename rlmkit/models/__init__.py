"""The model side of rlmkit, in one package: everything between "call this model with these messages"
and the bytes on the wire.

- ``lm.py``: ``LM`` (retries, cache, cost, limits, events) above one transport seam;
- ``transports/``: how a request reaches a model (OpenAI-compatible HTTP/1.1, litellm, a function);
- ``lm_cache.py``, ``lm_limits.py``, ``prices.py``: the cache, the concurrency caps, the price map;
- ``defaults.py``: which model a run gets when none is named.

The rest of the runtime talks to a model only through ``LM`` (or an object with the same
``acomplete``), so nothing outside this package knows which transport carried a call.
"""

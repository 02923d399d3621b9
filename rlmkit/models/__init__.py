"""The model side of rlmkit, in one package: everything between "call this model with these messages"
and the bytes on the wire.

- ``contract.py``: what every model provides (``Model``: ``acomplete``, ``describe``, ``traits``);
- ``lm.py``: ``LM`` (retries, cache, cost, limits, events) above one transport seam;
- ``transports/``: how a request reaches a model (OpenAI-compatible HTTP/1.1, litellm, a function);
- ``lm_cache.py``, ``lm_limits.py``, ``prices.py``: the cache, the concurrency caps, the price map;
- ``dspy_lm.py``: DSPy's models behind the same contract; ``shared.py``: one LM per model per process.

The rest of the runtime talks to a model only through the contract, so nothing outside this
package knows which transport carried a call. Which model a run gets when none is named is
decided above this package and ``rlmkit.local`` (``rlmkit.model_choice``).
"""

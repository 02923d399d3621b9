"""``rlmkit.RLM`` as a drop-in for ``dspy.RLM``: everything a DSPy program expects of
``dspy.RLM`` that is not rlmkit's own way of saying it, in one place.

- ``keywords.py``: dspy.RLM's constructor keywords, read into rlmkit's settings;
- ``names.py``: the name rules dspy.RLM enforces at construction, with its error types and words;
- ``tools.py``: ``tools=[fn, dspy.Tool, async fn]`` as the REPL's host functions;
- ``steps.py``: the trajectory read as dspy's list of steps, and ``final_reasoning``;
- ``predictors.py``: ``generate_action`` / ``extract``, and a saved dspy.RLM's state;
- ``verbose.py``: ``verbose=True``, each step through ``logging``.

DSPy models are called as themselves by ``rlmkit.models.dspy_lm``; DSPy ``CodeInterpreter``s
run as a sandbox through ``rlmkit.sandbox.interpreter``.
"""

"""The verbs ``programs`` adds to ``rlmkit`` (``eval``, ``demo``), registered as ``rlmkit.commands``
entry points in pyproject.toml; each module exposes ``register(app)``."""

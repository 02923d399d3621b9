"""The verbs ``optimizers`` adds to ``rlmkit`` (``optimize``, ``compile``, ``train``, ``train-loop``,
``self-train``), registered as ``rlmkit.commands`` entry points in pyproject.toml; each module
exposes ``register(app)``."""

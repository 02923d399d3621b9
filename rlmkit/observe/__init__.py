"""Adapters from rlmkit's event stream (``rlmkit.events``) to existing observability tools.

- ``dspy_bridge``: DSPy callbacks, ``track_usage``, ``inspect_history``, streamify status.
- ``mlflow``: spans for ``mlflow.dspy.autolog()`` (optional extra ``observe``).
- ``otel``: OpenTelemetry spans with GenAI attributes (``rlmkit.observe.otel.instrument()``).
- ``streaming``: ``RLM.stream()``, an async iterator of events.
"""

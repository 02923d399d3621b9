"""How an rlmkit LM looks to DSPy-shaped observers."""

from __future__ import annotations

from typing import Any


def safe_params(lm: Any) -> dict[str, Any]:
    """The LM's sampling settings, as its ``describe()`` shows them (no keys, no headers)."""
    return dict(lm.describe().get("params", {}))


class LMView:
    """What a DSPy callback sees as the ``instance`` of ``on_lm_start``: the rlmkit LM's
    model and settings under the names a ``dspy.LM`` has (never its API key)."""

    model_type = "chat"

    def __init__(self, lm: Any):
        self.lm = lm
        self.model = lm.model
        self.kwargs = safe_params(lm)
        self.cache = lm.describe().get("cache") is not None

    def __repr__(self) -> str:
        return f"LMView({self.model!r})"

"""One ``rlmkit.LM`` per model and settings per process, so every run shares its cache, its
connection pool and its concurrency limit instead of building new ones."""

from __future__ import annotations

import json
import threading
import weakref
from typing import Any

from rlmkit.models.dspy_lm import DirectDSPyLM
from rlmkit.models.lm import LM, dspy_lm_options

_shared: dict[str, LM] = {}
_shared_lock = threading.Lock()
# keyed by dspy.LM objects, which dspy ships untyped
_views: weakref.WeakKeyDictionary[Any, DirectDSPyLM] = weakref.WeakKeyDictionary()


def shared_lm(model: str, **kwargs: Any) -> LM:
    """The one LM of this process for ``model`` built with ``kwargs`` (built on first use)."""
    key = json.dumps([model, kwargs], sort_keys=True, default=repr)
    with _shared_lock:
        lm = _shared.get(key)
        if lm is None:
            lm = _shared[key] = LM(model, **kwargs)
        return lm


def direct_view(lm: Any) -> DirectDSPyLM:
    """One view per ``dspy.LM`` object, over the one shared ``LM`` for its settings."""
    with _shared_lock:
        view = _views.get(lm)
    if view is None:
        view = DirectDSPyLM(lm, shared_lm(lm.model, **dspy_lm_options(lm)))
        with _shared_lock:
            view = _views.setdefault(lm, view)
    return view


__all__ = ["direct_view", "shared_lm"]

"""Which model do I get: the model a run calls, from what was passed or configured.

With no ``lm=``: ``dspy.settings.lm``, then ``rlmkit.configure(...)``, then ``$RLMKIT_MODEL``,
then a provider whose key is in the environment (``PROVIDER_DEFAULTS``), else the embedded
local model (announced once). A model named by a string or a ``dspy.LM`` resolves to the
same ``rlmkit.LM`` every time in a process (``rlmkit.models.shared``); any object that
implements the model contract (``rlmkit.models.contract.Model``) is used as it is.

This module sits above both ``rlmkit.models`` and ``rlmkit.local`` (the embedded model is one
of the choices): neither imports it.
"""

from __future__ import annotations

import functools
import logging
import os
import sys

from rlmkit.errors import UserError
from rlmkit.models.contract import Model
from rlmkit.models.dspy_lm import DirectDSPyLM, DSPyLM, wants_dspy_call
from rlmkit.models.lm import LM
from rlmkit.models.shared import direct_view, shared_lm

log = logging.getLogger("rlmkit")

# With no LM configured, a provider key in the environment picks that provider (first match).
PROVIDER_DEFAULTS = (
    ("OPENAI_API_KEY", "openai/gpt-5-mini"),
    ("ANTHROPIC_API_KEY", "anthropic/claude-haiku-4-5"),
    ("GEMINI_API_KEY", "gemini/gemini-2.5-flash"),
)

_configured: Model | None = None


def configure(lm: object) -> None:
    """Set (or with None, clear) the LM that rlmkit uses when none is passed: anything
    ``resolve_lm`` takes."""
    global _configured
    _configured = None if lm is None else resolve_lm(lm)


def resolve_lm(lm: object) -> Model:
    """An rlmkit LM from an LM, a dspy.LM, a model string, or None (the configured default);
    any other DSPy LM (a ``dspy.BaseLM``) or a callable, wrapped to be called as itself."""
    if isinstance(lm, (LM, DSPyLM, DirectDSPyLM)) or isinstance(lm, Model):  # the contract: as is
        return lm
    if isinstance(lm, str):
        return shared_lm(lm)
    if lm is not None:
        if wants_dspy_call(lm):  # DummyLM, a custom BaseLM, a callable: called as itself
            return DSPyLM(lm)
        if hasattr(lm, "model") and hasattr(lm, "kwargs"):  # a plain dspy.LM: the direct transport
            return direct_view(lm)
        raise UserError(
            f"lm must be an rlmkit.LM, a dspy.BaseLM, a callable or a model string, got {type(lm).__name__}"
        )
    dspy = sys.modules.get("dspy")  # if dspy was never imported, nothing can be configured there
    dspy_lm = getattr(getattr(dspy, "settings", None), "lm", None) if dspy else None
    if dspy_lm is not None:
        return resolve_lm(dspy_lm)
    if _configured is not None:
        return _configured
    model = os.environ.get("RLMKIT_MODEL") or next(
        (default for key, default in PROVIDER_DEFAULTS if os.environ.get(key)), None
    )
    if model is not None:  # a provider key in the environment: use that provider's default model
        return shared_lm(model)
    return embedded_lm()


@functools.lru_cache(maxsize=1)
def embedded_lm() -> LM:
    """The embedded model's LM, built (and announced) once per process."""
    from rlmkit.local import local_lm

    log.warning("rlmkit: no LM configured; using the embedded local model (Qwen2.5-Coder-1.5B). "
                "Pass lm=... or call rlmkit.configure(...) to use another.")  # fmt: skip
    lm: LM = local_lm()
    return lm


def window_tokens_of(lm: Model) -> int | None:
    """The context window of ``lm``'s model in tokens: its traits' (``LM(window_tokens=...)``),
    else the embedded model's server context, else ``max_input_tokens`` from litellm's model map
    (read as data); None when nobody knows it."""
    from rlmkit.local import LocalServerConfig, is_embedded
    from rlmkit.models import prices

    if lm.traits.window_tokens is not None:
        return lm.traits.window_tokens
    if is_embedded(lm.model):
        return LocalServerConfig().ctx  # the server's KV pool, which one long prompt may fill
    window = (prices.model_prices(lm.model) or {}).get("max_input_tokens")
    return window if isinstance(window, int) and window >= 256 else None


__all__ = ["PROVIDER_DEFAULTS", "configure", "embedded_lm", "resolve_lm", "window_tokens_of"]

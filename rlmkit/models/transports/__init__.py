"""How ``rlmkit.LM`` reaches a model: one small async interface, three implementations.

- ``openai``: any OpenAI-compatible server over shared keep-alive HTTP/1.1 connections (the fast path);
  picked for ``openai/...`` models and for an ``api_base`` with an OpenAI-compatible prefix.
- ``litellm``: every other provider, imported only when such an LM is built.
- ``function``: an in-process model (``rlmkit.FunctionLM``), for tests and for your own.
"""

from __future__ import annotations

import os

from rlmkit.errors import LMConfigError, UserError
from rlmkit.models.transports.base import PLACEHOLDER_KEY, ModelReply, ModelRequest, ProviderError, Transport
from rlmkit.models.transports.function import (
    FunctionTransport,
    ModelRequestsBlocked,
    block_model_requests,
    model_requests_allowed,
    set_model_requests_allowed,
)

# Provider prefixes whose servers speak OpenAI's chat-completions API (litellm's names).
OPENAI_COMPATIBLE = frozenset({"openai", "hosted_vllm", "openai_like", "lm_studio", "llamafile", "llamacpp"})
OPENAI_URL = "https://api.openai.com/v1"


def make_transport(
    model: str,
    *,
    api_base: str | None,
    api_key: str | None,
    pool: int,
    transport: str | Transport | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[Transport, str]:
    """The transport for ``model`` and the model name to send through it.

    ``transport`` forces one: ``"openai"``, ``"litellm"`` or a ``Transport`` object.
    Raises ``LMConfigError`` (before any call) for a model no transport can route or a missing key.
    """
    if transport is not None and not isinstance(transport, str):
        if not isinstance(transport, Transport):
            raise UserError(f"transport must be 'openai', 'litellm' or a Transport object, got {transport!r}")
        return transport, model
    provider, slash, name = model.partition("/")
    if transport is None:
        transport = (
            "openai"
            if slash and provider in OPENAI_COMPATIBLE and (provider == "openai" or api_base)
            else "litellm"
        )
    if transport == "litellm":
        from rlmkit.models.transports.litellm import LiteLLMTransport  # imports litellm: only here

        return LiteLLMTransport(model, api_base, api_key), model
    if transport != "openai":
        raise UserError(f"unknown transport {transport!r}: use 'openai', 'litellm' or a Transport object")
    if not slash or not name.strip():
        raise LMConfigError(
            f"unknown model {model!r}: the openai transport expects 'provider/model', e.g. "
            "'openai/gpt-4o-mini' or 'openai/<name>' with api_base=...",
            model=model,
        )
    from rlmkit.models.transports.openai import OpenAITransport

    base = api_base or os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE") or OPENAI_URL
    key = api_key or os.environ.get("OPENAI_API_KEY")
    if key is None:
        if api_base is None:
            raise LMConfigError(
                f"no API key for {model!r}: set OPENAI_API_KEY in the environment, or pass api_key=...",
                model=model,
            )
        key = PLACEHOLDER_KEY  # a self-hosted server usually needs no real key
    return OpenAITransport(base, key, pool=pool, headers=headers), name


__all__ = [
    "PLACEHOLDER_KEY",
    "FunctionTransport",
    "ModelReply",
    "ModelRequest",
    "ModelRequestsBlocked",
    "ProviderError",
    "Transport",
    "block_model_requests",
    "make_transport",
    "model_requests_allowed",
    "set_model_requests_allowed",
]


def __getattr__(name: str) -> type[Transport]:  # the two network transports load on first use
    if name == "OpenAITransport":
        from rlmkit.models.transports.openai import OpenAITransport

        return OpenAITransport
    if name == "LiteLLMTransport":
        from rlmkit.models.transports.litellm import LiteLLMTransport

        return LiteLLMTransport
    raise AttributeError(name)

"""Every provider litellm knows (Anthropic, Gemini, Bedrock, ...), imported on first use.

litellm takes seconds to import, so nothing reaches this module unless an LM is built
for a provider the direct OpenAI-compatible path does not serve.

- Its cost map is forced local (before the import), so it never fetches prices.
- Its retries are off: ``rlmkit.LM`` retries, once for every transport.
- It hands every finished call to a background logging thread. With no litellm callbacks
  registered nothing consumes that work, yet it competes for the GIL with the next call;
  we mark calls internal (litellm's own switch for that) to skip it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from typing import Any

from rlmkit.errors import LMConfigError
from rlmkit.models.transports.base import (
    PLACEHOLDER_KEY,
    ModelReply,
    ModelRequest,
    ProviderError,
    retry_after_s,
)

log = logging.getLogger("rlmkit")

_NETWORK_ERRORS = {
    "APIConnectionError",
    "APITimeoutError",
    "Timeout",
    "TransportError",
    "ConnectionError",
    "TimeoutError",
}


# Any: litellm ships no types, so the module and what it returns are untyped to the checker.
def import_litellm() -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm  # cached by sys.modules after the first call

    if not getattr(litellm, "_rlmkit_configured", False):
        litellm.suppress_debug_info = True  # no "Provider List" banners on stdout
        litellm.telemetry = False
        litellm._rlmkit_configured = True
    return litellm


class LiteLLMTransport:
    """``litellm.acompletion`` for one model; the model string keeps its provider prefix."""

    name = "litellm"

    def __init__(self, model: str, api_base: str | None, api_key: str | None):
        self.api_base = api_base
        self._api_key = check_model(model, api_base, api_key)

    def __repr__(self) -> str:
        return f"LiteLLMTransport(api_base={self.api_base!r})"

    async def complete(self, request: ModelRequest) -> ModelReply:
        litellm = import_litellm()
        kwargs: dict[str, Any] = {
            "model": request.model,
            "messages": request.messages,
            "timeout": request.timeout,
            "num_retries": 0,
            **request.params,
        }
        if request.max_tokens is not None:
            kwargs["max_tokens"] = request.max_tokens
        if request.stop:
            kwargs["stop"] = request.stop
        if self.api_base is not None:
            kwargs["api_base"] = self.api_base
        if self._api_key is not None:
            kwargs["api_key"] = self._api_key
        with _without_logging_worker(litellm):
            try:
                response = await litellm.acompletion(**kwargs)
            except Exception as exc:
                raise _translate(exc) from exc
        if not getattr(response, "choices", None):
            raise ProviderError("the response had no choices", status=502)
        choice = response.choices[0]
        usage = getattr(response, "usage", None)
        details = getattr(usage, "prompt_tokens_details", None)
        return ModelReply(
            text=choice.message.content or "",
            model=getattr(response, "model", None) or request.model,
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            cached_prompt_tokens=int(getattr(details, "cached_tokens", 0) or 0),
            finish_reason=getattr(choice, "finish_reason", None),
        )


def check_model(model: str, api_base: str | None, api_key: str | None) -> str | None:
    """Fail before any call on a model string litellm cannot route, or a missing key.

    Returns the key to send: the caller's, none (litellm reads the environment), or a
    placeholder for a self-hosted server that needs no key.
    """
    litellm = import_litellm()
    try:
        litellm.get_llm_provider(model, api_base=api_base)
    except Exception:  # noqa: BLE001 - litellm raises a plain BadRequestError here
        raise LMConfigError(
            f"unknown model {model!r}: litellm expects 'provider/model', e.g. 'openai/gpt-4o-mini', "
            "'anthropic/claude-3-5-haiku-latest', or 'openai/<name>' with api_base=... for an "
            "OpenAI-compatible server (vLLM, SGLang, llama.cpp)",
            model=model,
        ) from None
    _price_unknown_model_at_zero(litellm, model)
    if api_key is not None:
        return api_key
    env = litellm.validate_environment(model)
    if env.get("keys_in_environment", True):
        return None
    if api_base is not None:  # a self-hosted server usually needs no real key
        return PLACEHOLDER_KEY
    missing = " and ".join(env.get("missing_keys") or ["the provider's API key variable"])
    raise LMConfigError(
        f"no API key for {model!r}: set {missing} in the environment, or pass api_key=...", model=model
    )


def _price_unknown_model_at_zero(litellm: Any, model: str) -> None:
    """Register a model litellm cannot price with cost 0.

    For an unknown model litellm searches its whole cost map for look-alikes on every call
    (about a quarter of its per-call time) to then find no price. A zero-price entry makes
    that lookup direct. rlmkit prices calls itself (``rlmkit.models.prices``), from the same map.
    """
    try:
        litellm.get_model_info(model)
        return
    except Exception:  # noqa: BLE001 - "not mapped" comes as various exception types
        log.debug("litellm has no price for %s: registering it at cost 0", model)
    quiet = logging.getLogger("LiteLLM")
    level, quiet.level = quiet.level, logging.ERROR  # it warns that cache prices default to 0
    try:
        litellm.register_model(
            {
                model: {
                    "input_cost_per_token": 0.0,
                    "output_cost_per_token": 0.0,
                    "mode": "chat",
                    "litellm_provider": litellm.get_llm_provider(model)[1],
                }
            }
        )
    finally:
        quiet.level = level


def _translate(exc: Exception) -> ProviderError:
    status = getattr(exc, "status_code", None)
    network = _is_network_error(exc)
    headers = getattr(exc, "litellm_response_headers", None) or getattr(
        getattr(exc, "response", None), "headers", None
    )
    first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return ProviderError(
        f"{type(exc).__name__}: {first_line}",
        status=status if isinstance(status, int) else None,
        network=network,
        retry_after=retry_after_s(headers),
    )


def _is_network_error(error: BaseException) -> bool:
    """True when the server was never reached or never answered (litellm may wrap that as a 500)."""
    exc: BaseException | None = error
    seen = 0
    while exc is not None and seen < 8:  # walk the cause chain: litellm -> openai -> httpx -> OSError
        if any(cls.__name__ in _NETWORK_ERRORS for cls in type(exc).__mro__):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


@contextlib.contextmanager
def _without_logging_worker(litellm: Any) -> Iterator[None]:
    """Skip litellm's per-call background logging when no litellm callback would consume it."""
    flag = getattr(sys.modules.get("litellm._internal_context"), "is_internal_call", None)
    busy = litellm.callbacks or litellm.success_callback or litellm._async_success_callback
    if flag is None or busy:
        yield
        return
    token = flag.set(True)
    try:
        yield
    finally:
        flag.reset(token)

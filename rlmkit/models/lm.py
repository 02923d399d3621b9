"""The LM layer: retries, cost, a disk cache and a concurrency limit, above one transport seam.

    lm = rlmkit.LM("openai/gpt-4o-mini")             # or any litellm "provider/model" string
    reply = lm.complete([{"role": "user", "content": "hi"}])
    reply.text, reply.usage.cost, reply.cached

Why it looks the way it does:
- How a request reaches a model is a transport (``rlmkit.models.transports``): OpenAI-compatible
  servers go straight over HTTP/1.1 on asyncio streams, other providers through litellm
  (imported only then), an in-process function for tests. Everything else is written once,
  here, for all of them.
- Retries are ours: one policy, honouring Retry-After; a transport says what failed
  (``ProviderError``) and the error the caller sees is translated here, once.
- Cost comes from litellm's price map read as data (``rlmkit.models.prices``), the same numbers on
  every transport, with neither ``import rlmkit`` nor building an LM touching the network.
- Sync ``complete`` runs ``acomplete`` on rlmkit's shared loop: one code path.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import random
import re
import time
from collections.abc import Callable
from functools import cached_property
from typing import Any

from rlmkit.concurrency.sync_loop import run_sync
from rlmkit.errors import LMConfigError, LMError, LMUnavailableError, UserError
from rlmkit.models.contract import Completion, ModelTraits, Preset
from rlmkit.models.lm_cache import cache_key, current_rollout_id, default_cache_dir, open_cache
from rlmkit.models.lm_limits import ConcurrencyLimit
from rlmkit.models.prices import call_cost
from rlmkit.models.prices import warm as warm_prices
from rlmkit.models.transports import (
    PLACEHOLDER_KEY,
    ModelReply,
    ModelRequest,
    ModelRequestsBlocked,
    ProviderError,
    Transport,
    make_transport,
    model_requests_allowed,
)
from rlmkit.trajectory import ChatMessage, Usage

log = logging.getLogger("rlmkit")

_BACKOFF_BASE_S = 0.25
_BACKOFF_CAP_S = 20.0
_RETRY_AFTER_CAP_S = 60.0


class LM:
    """A chat model: any litellm ``provider/model``, an OpenAI-compatible ``api_base``, or a transport.

    ``max_tokens`` and ``stop`` are first-class (also per call); other keyword arguments are
    sampling options sent as they are (``temperature``, ``top_p``, ``seed``, ...).
    ``transport`` forces ``"openai"`` / ``"litellm"`` or takes a ``Transport`` object.
    ``window_tokens``: the model's context window, for a model litellm's map does not know.
    """

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        stop: str | list[str] | None = None,
        cache: bool | str | os.PathLike[str] = True,
        max_concurrency: int = 16,
        num_retries: int = 4,
        timeout: float = 120.0,
        transport: str | Transport | None = None,
        input_chars: int | None = None,
        window_tokens: int | None = None,
        preset: Preset | None = None,
        **kwargs: Any,
    ):
        if not isinstance(model, str) or not model.strip():
            raise LMConfigError(
                f"model must be a litellm model string like 'openai/gpt-4o-mini', got {model!r}"
            )
        if max_concurrency < 1 or num_retries < 0 or timeout <= 0:
            raise UserError("LM needs max_concurrency >= 1, num_retries >= 0 and timeout > 0")
        if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
            raise UserError(f"max_tokens must be a positive int, got {max_tokens!r}")
        self.model = model
        self.api_base = api_base
        self.num_retries = num_retries
        self.timeout = timeout
        self.max_concurrency = max_concurrency
        self.max_tokens = max_tokens
        self.input_chars = input_chars  # how much text one call reads well; prompts size chunks to it
        self.window_tokens = window_tokens  # the context window, when the caller knows it best
        # A program tuned for this model ({"instructions", "demos", "knobs", "provenance"}): an
        # RLM with no instructions or demos of its own runs it (``rlmkit.run.spec.with_preset``).
        self.preset = preset
        self.stop = _stop_list(stop)
        self.params = {k: v for k, v in {"temperature": temperature, **kwargs}.items() if v is not None}
        headers = self.params.pop("extra_headers", None) if transport != "litellm" else None
        self.transport, self._wire_model = make_transport(
            model,
            api_base=api_base,
            api_key=api_key,
            pool=max_concurrency,
            transport=transport,
            headers=headers,
        )
        self._api_key = api_key
        self.cache_dir = None if cache is False else (default_cache_dir() if cache is True else cache)
        self._cache = open_cache(self.cache_dir) if self.cache_dir is not None else None
        self._limit = ConcurrencyLimit(max_concurrency)
        if self.traits.reaches_network:
            warm_prices(model)  # the price map loads (tens of ms) while the first request is prepared

    @cached_property
    def traits(self) -> ModelTraits:
        """What a run may assume about this LM (``rlmkit.models.contract``); its settings never change."""
        return ModelTraits(
            max_tokens=self.max_tokens,
            stop=tuple(self.stop or ()),
            preset=self.preset,
            input_chars=self.input_chars,
            window_tokens=self.window_tokens,
            reaches_network=self.transport.name != "function",
        )

    def describe(self) -> dict[str, object]:
        """What this LM is, safe to log: never the API key or headers."""
        secret = re.compile(r"(key|secret|password|token$|headers)", re.IGNORECASE)
        params = {k: v for k, v in self.params.items() if not secret.search(k)}
        params.update(
            {k: v for k, v in (("max_tokens", self.max_tokens), ("stop", self.stop)) if v is not None}
        )
        return {
            "model": self.model,
            "api_base": self.api_base,
            "params": params,
            "transport": self.transport.name,
            "cache": str(self.cache_dir) if self.cache_dir is not None else None,
            "max_concurrency": self.max_concurrency,
        }

    def __repr__(self) -> str:
        return f"LM({self.model!r}, api_base={self.api_base!r})"

    def __deepcopy__(self, memo: dict[int, object]) -> LM:
        return self  # a handle: copies of a program share one cache and one concurrency limit

    def __getstate__(self) -> dict[str, object]:
        return {k: v for k, v in self.__dict__.items() if k not in ("_cache", "_limit")}

    def __setstate__(self, state: dict[str, object]) -> None:  # e.g. sent to a worker process
        self.__dict__.update(state)
        self._cache = open_cache(self.cache_dir) if self.cache_dir is not None else None
        self._limit = ConcurrencyLimit(self.max_concurrency)

    # -- calls ---------------------------------------------------------------------
    def complete(
        self,
        messages: list[ChatMessage],
        *,
        rollout_id: int | None = None,
        max_tokens: int | None = None,
        stop: str | list[str] | None = None,
        **overrides: object,
    ) -> Completion:
        return run_sync(
            self.acomplete(messages, rollout_id=rollout_id, max_tokens=max_tokens, stop=stop, **overrides)
        )

    async def acomplete(
        self,
        messages: list[ChatMessage],
        *,
        rollout_id: int | None = None,
        max_tokens: int | None = None,
        stop: str | list[str] | None = None,
        **overrides: object,
    ) -> Completion:
        request, key = self._prepare(messages, rollout_id, max_tokens, stop, overrides)
        if (hit := self._from_cache(key)) is not None:
            return hit
        if self.traits.reaches_network and not model_requests_allowed():
            raise ModelRequestsBlocked(
                f"a request to {self.model!r} was refused: model requests are blocked "
                "(block_model_requests / RLMKIT_ALLOW_MODEL_REQUESTS=0)"
            )
        async with self._limit.aslot():
            started = time.perf_counter()
            for attempt in itertools.count():
                try:
                    reply = await self.transport.complete(request)
                    break
                except ProviderError as exc:
                    await asyncio.sleep(self._retry_delay(exc, attempt))
        return self._finish(reply, started, key)

    # -- the parts every call shares (no I/O but the cache) ----------------------------
    def _prepare(
        self,
        messages: list[ChatMessage],
        rollout_id: int | None,
        max_tokens: int | None,
        stop: str | list[str] | None,
        overrides: dict[str, object],
    ) -> tuple[ModelRequest, str | None]:
        if (
            not isinstance(messages, list)
            or not messages
            or not all(isinstance(m, dict) and "role" in m and "content" in m for m in messages)
        ):
            raise UserError("messages must be a non-empty list of {'role': ..., 'content': ...} dicts")
        params = {**self.params, **{k: v for k, v in overrides.items() if v is not None}}
        max_tokens = max_tokens if max_tokens is not None else params.pop("max_tokens", self.max_tokens)
        stop_list = _stop_list(stop) if stop is not None else self.stop
        params.pop("max_tokens", None)
        request = ModelRequest(
            messages=messages,
            model=self._wire_model,
            params=params,
            max_tokens=max_tokens,
            stop=stop_list,
            timeout=self.timeout,
        )
        if self._cache is None:
            return request, None
        rollout_id = current_rollout_id.get() if rollout_id is None else rollout_id
        answer_params = {**params, "max_tokens": max_tokens, "stop": stop_list}  # what changes the answer
        return request, cache_key(self.model, messages, answer_params, rollout_id)

    def _from_cache(self, key: str | None) -> Completion | None:
        stored = self._cache.get(key) if key is not None and self._cache is not None else None
        if stored is None:
            return None
        # A hit costs nothing; its tokens are kept for reference, and counted as a cached call.
        usage = Usage(
            calls=1,
            cached_calls=1,
            prompt_tokens=stored["prompt_tokens"],
            completion_tokens=stored["completion_tokens"],
            cost=0.0,
        )
        return Completion(stored["text"], stored["model"], usage, True, 0.0, stored["finish_reason"])

    def _finish(self, reply: ModelReply, started: float, key: str | None) -> Completion:
        duration = time.perf_counter() - started
        cost = reply.cost
        if cost is None:
            cost = call_cost(
                self.model,
                reply.prompt_tokens,
                reply.completion_tokens,
                reply.cached_prompt_tokens,
                served_as=reply.model,
            )
        usage = Usage(
            calls=1, prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens, cost=cost
        )
        model = reply.model or self.model
        completion = Completion(reply.text, model, usage, False, duration, reply.finish_reason)
        if key is not None and self._cache is not None:
            self._cache.set(
                key,
                {
                    "text": reply.text,
                    "model": model,
                    "prompt_tokens": reply.prompt_tokens,
                    "completion_tokens": reply.completion_tokens,
                    "finish_reason": reply.finish_reason,
                },
            )
        return completion

    def _retry_delay(self, exc: ProviderError, attempt: int) -> float:
        """Seconds to wait before the next try; raises the translated error when it is over."""
        if not exc.transient or attempt >= self.num_retries:
            raise self._translate(exc, attempt + 1) from None
        if exc.retry_after is not None:
            return min(exc.retry_after, _RETRY_AFTER_CAP_S)
        return random.uniform(0.5, 1.0) * min(_BACKOFF_CAP_S, _BACKOFF_BASE_S * 2.0**attempt)

    def _translate(self, exc: ProviderError, tries: int) -> LMError:
        detail = _scrub(str(exc), self._api_key)[:300]
        where, status = self.api_base or "the provider", exc.status
        if status in (401, 403):
            return LMConfigError(
                f"{where} rejected the API key for {self.model!r} ({status}): {detail}",
                model=self.model,
                status=status,
            )
        if status == 404:
            return LMConfigError(
                f"{where} does not know model {self.model!r} (404): {detail}", model=self.model, status=status
            )
        if exc.network:
            return LMUnavailableError(
                f"could not reach {where} for {self.model!r} after {tries} tries: {detail}",
                model=self.model,
                status=status,
            )
        if exc.transient:
            return LMUnavailableError(
                f"{where} kept failing for {self.model!r} ({status}) after {tries} tries: {detail}",
                model=self.model,
                status=status,
            )
        return LMError(f"{self.model!r} call failed: {detail}", model=self.model, status=status)


def _stop_list(stop: str | list[str] | None) -> list[str] | None:
    if stop is None:
        return None
    stops = [stop] if isinstance(stop, str) else list(stop)
    if not all(isinstance(s, str) and s for s in stops):
        raise UserError(f"stop must be a non-empty string or a list of them, got {stop!r}")
    return stops or None


MIN_SCRUBBED_KEY = 6  # shorter "keys" ("t", "x", "test") are placeholders: hiding every "t" in an
# error message ("Connec***Error: All connec***ion a******emp***s failed") hid the error instead


def _scrub(text: str, secret: str | None) -> str:
    text = re.sub(r"(sk-|Bearer )[A-Za-z0-9_\-]{6,}", r"\1***", text)
    if secret and len(secret) >= MIN_SCRUBBED_KEY and secret != PLACEHOLDER_KEY:
        return text.replace(secret, "***")
    return text


def FunctionLM(fn: Callable[..., object], *, model: str = "function/model", **kwargs: Any) -> LM:
    """An ``LM`` answered by ``fn(messages[, request]) -> str`` in process (sync or async).

    Everything above the transport is the real thing (retries, usage, cache, limits); the
    cache is off by default so a scripted function is always asked.
    """
    from rlmkit.models.transports.function import FunctionTransport

    kwargs.setdefault("cache", False)
    return LM(model, transport=FunctionTransport(fn), **kwargs)


def dspy_lm_options(lm: object) -> dict[str, Any]:
    """A ``dspy.LM``'s settings as ``LM`` keyword arguments: sampling kwargs, key, api_base, cache."""
    kwargs = dict(getattr(lm, "kwargs", {}) or {})
    kwargs.pop("rollout_id", None)  # a per-call option in DSPy, not a model setting
    api_base = kwargs.pop("api_base", None) or kwargs.pop("base_url", None)
    return {
        **kwargs,
        "api_base": api_base,
        "cache": bool(getattr(lm, "cache", True)),
        "num_retries": getattr(lm, "num_retries", 4),
    }


__all__ = ["LM", "Completion", "FunctionLM"]

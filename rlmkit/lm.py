"""The LM layer: chat completions through litellm, with retries, cost, a disk cache and a
concurrency limit shared by threads and coroutines.

    lm = rlmkit.LM("openai/gpt-4o-mini")             # or any litellm "provider/model" string
    reply = lm.complete([{"role": "user", "content": "hi"}])
    reply.text, reply.usage.cost, reply.cached

Why it looks the way it does:
- litellm is imported on first use, with its cost map forced local, so neither
  ``import rlmkit`` nor building an LM ever waits on the network.
- Retries are ours (litellm's are off): one policy for sync and async, honouring
  Retry-After, and errors translated into ``rlmkit.errors`` where they enter.
- litellm hands every finished call to a background logging thread. With no litellm
  callbacks registered nothing consumes that work, yet it competes for the GIL with the
  next call; we mark calls internal (litellm's own switch for that) to skip it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import os
import random
import re
import sys
import time
from dataclasses import dataclass
from typing import Any

from rlmkit.errors import LMConfigError, LMError, LMUnavailableError, UserError
from rlmkit.lm_cache import cache_key, default_cache_dir, open_cache
from rlmkit.lm_limits import ConcurrencyLimit
from rlmkit.trajectory import Usage

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before litellm is ever imported
log = logging.getLogger("rlmkit")

_BACKOFF_BASE_S = 0.25
_BACKOFF_CAP_S = 20.0
_RETRY_AFTER_CAP_S = 60.0
_PLACEHOLDER_KEY = "no-key"  # OpenAI-compatible servers without auth still need some key sent


def _litellm() -> Any:
    import litellm  # cached by sys.modules after the first call

    if not getattr(litellm, "_rlmkit_configured", False):
        litellm.suppress_debug_info = True  # no "Provider List" banners on stdout
        litellm.telemetry = False
        litellm._rlmkit_configured = True
    return litellm


@dataclass
class Completion:
    """One model answer. ``usage.cost`` is in dollars (0.0 for models litellm cannot price)."""

    text: str
    model: str
    usage: Usage
    cached: bool
    duration_s: float
    finish_reason: str | None = None


class LM:
    """A chat model reached through litellm (any provider, or an OpenAI-compatible ``api_base``)."""

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        cache: bool | str | os.PathLike = True,
        max_concurrency: int = 16,
        num_retries: int = 4,
        timeout: float = 120.0,
        **kwargs: Any,
    ):
        if not isinstance(model, str) or not model.strip():
            raise LMConfigError(
                f"model must be a litellm model string like 'openai/gpt-4o-mini', got {model!r}"
            )
        if max_concurrency < 1 or num_retries < 0 or timeout <= 0:
            raise UserError("LM needs max_concurrency >= 1, num_retries >= 0 and timeout > 0")
        self.model = model
        self.api_base = api_base
        self.num_retries = num_retries
        self.timeout = timeout
        self.max_concurrency = max_concurrency
        self.params = {"temperature": temperature, "max_tokens": max_tokens, **kwargs}
        self.params = {k: v for k, v in self.params.items() if v is not None}
        self._api_key = self._check_provider(model, api_base, api_key)
        self.cache_dir = None if cache is False else (default_cache_dir() if cache is True else cache)
        self._cache = open_cache(self.cache_dir) if self.cache_dir is not None else None
        self._limit = ConcurrencyLimit(max_concurrency)

    @staticmethod
    def _check_provider(model: str, api_base: str | None, api_key: str | None) -> str | None:
        """Fail before any call on a model string litellm cannot route, or a missing key.

        Returns the key to send: the caller's, none (litellm reads the environment), or a
        placeholder for a self-hosted server that needs no key.
        """
        litellm = _litellm()
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
            return _PLACEHOLDER_KEY
        missing = " and ".join(env.get("missing_keys") or ["the provider's API key variable"])
        raise LMConfigError(
            f"no API key for {model!r}: set {missing} in the environment, or pass api_key=...", model=model
        )

    @classmethod
    def from_dspy(cls, lm: Any) -> LM:
        """Build from a ``dspy.LM``: same model string, sampling kwargs, key and api_base."""
        kwargs = dict(getattr(lm, "kwargs", {}) or {})
        kwargs.pop("rollout_id", None)  # a per-call option in DSPy, not a model setting
        api_base = kwargs.pop("api_base", None) or kwargs.pop("base_url", None)
        cache = bool(getattr(lm, "cache", True))
        return cls(
            lm.model, api_base=api_base, cache=cache, num_retries=getattr(lm, "num_retries", 4), **kwargs
        )

    def describe(self) -> dict:
        """What this LM is, safe to log: never the API key or headers."""
        secret = re.compile(r"(key|secret|password|token$|headers)", re.IGNORECASE)
        params = {k: v for k, v in self.params.items() if not secret.search(k) or k == "max_tokens"}
        return {"model": self.model, "api_base": self.api_base, "params": params,
                "cache": str(self.cache_dir) if self.cache_dir is not None else None,
                "max_concurrency": self.max_concurrency}  # fmt: skip

    def __repr__(self) -> str:
        return f"LM({self.model!r}, api_base={self.api_base!r})"

    def __deepcopy__(self, memo: dict) -> LM:
        return self  # a handle: copies of a program share one cache and one concurrency limit

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k not in ("_cache", "_limit")}

    def __setstate__(self, state: dict) -> None:  # e.g. sent to a worker process
        self.__dict__.update(state)
        self._cache = open_cache(self.cache_dir) if self.cache_dir is not None else None
        self._limit = ConcurrencyLimit(self.max_concurrency)

    # -- calls ---------------------------------------------------------------------
    def complete(
        self, messages: list[dict], *, rollout_id: int | None = None, **overrides: Any
    ) -> Completion:
        request, key = self._prepare(messages, rollout_id, overrides)
        if (hit := self._from_cache(key)) is not None:
            return hit
        litellm = _litellm()
        with self._limit.slot(), _without_logging_worker(litellm):
            started = time.perf_counter()
            for attempt in itertools.count():
                try:
                    response = litellm.completion(**request)
                    break
                except Exception as exc:  # noqa: BLE001 - translated or retried below
                    time.sleep(self._retry_delay(exc, attempt))
        return self._finish(response, started, key)

    async def acomplete(
        self, messages: list[dict], *, rollout_id: int | None = None, **overrides: Any
    ) -> Completion:
        request, key = self._prepare(messages, rollout_id, overrides)
        if (hit := self._from_cache(key)) is not None:
            return hit
        litellm = _litellm()
        async with self._limit.aslot():
            with _without_logging_worker(litellm):
                started = time.perf_counter()
                for attempt in itertools.count():
                    try:
                        response = await litellm.acompletion(**request)
                        break
                    except Exception as exc:  # noqa: BLE001
                        await asyncio.sleep(self._retry_delay(exc, attempt))
        return self._finish(response, started, key)

    # -- the parts both paths share (no I/O but the cache) ----------------------------
    def _prepare(
        self, messages: list[dict], rollout_id: int | None, overrides: dict
    ) -> tuple[dict, str | None]:
        if (
            not isinstance(messages, list)
            or not messages
            or not all(isinstance(m, dict) and "role" in m and "content" in m for m in messages)
        ):
            raise UserError("messages must be a non-empty list of {'role': ..., 'content': ...} dicts")
        params = {**self.params, **{k: v for k, v in overrides.items() if v is not None}}
        key = cache_key(self.model, messages, params, rollout_id) if self._cache is not None else None
        request = {
            "model": self.model,
            "messages": messages,
            "timeout": self.timeout,
            "num_retries": 0,
            **params,
        }
        if self.api_base is not None:
            request["api_base"] = self.api_base
        if self._api_key is not None:
            request["api_key"] = self._api_key
        return request, key

    def _from_cache(self, key: str | None) -> Completion | None:
        stored = self._cache.get(key) if key is not None else None
        if stored is None:
            return None
        # A hit costs nothing; its tokens are kept for reference, and counted as a cached call.
        usage = Usage(calls=1, cached_calls=1, prompt_tokens=stored["prompt_tokens"],
                      completion_tokens=stored["completion_tokens"], cost=0.0)  # fmt: skip
        return Completion(stored["text"], stored["model"], usage, True, 0.0, stored["finish_reason"])

    def _finish(self, response: Any, started: float, key: str | None) -> Completion:
        duration = time.perf_counter() - started
        if not getattr(response, "choices", None):
            raise LMError(f"{self.model!r} returned no choices", model=self.model)
        choice = response.choices[0]
        text = choice.message.content or ""
        usage_in = getattr(response, "usage", None)
        prompt_tokens = int(getattr(usage_in, "prompt_tokens", 0) or 0)
        completion_tokens = int(getattr(usage_in, "completion_tokens", 0) or 0)
        # litellm already priced the call (None when the model is not in its cost map).
        cost = float((getattr(response, "_hidden_params", None) or {}).get("response_cost") or 0.0)
        usage = Usage(calls=1, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, cost=cost)
        model = getattr(response, "model", None) or self.model
        completion = Completion(text, model, usage, False, duration, getattr(choice, "finish_reason", None))
        if key is not None:
            self._cache.set(key, {"text": text, "model": model, "prompt_tokens": prompt_tokens,
                                  "completion_tokens": completion_tokens,
                                  "finish_reason": completion.finish_reason})  # fmt: skip
        return completion

    def _retry_delay(self, exc: Exception, attempt: int) -> float:
        """Seconds to wait before the next try; raises the translated error when it is over."""
        status = getattr(exc, "status_code", None)
        transient = status == 429 or (isinstance(status, int) and status >= 500) or _is_network_error(exc)
        if not transient or attempt >= self.num_retries:
            raise self._translate(exc, status, attempt + 1) from None
        retry_after = _retry_after_s(exc)
        if retry_after is not None:
            return min(retry_after, _RETRY_AFTER_CAP_S)
        return random.uniform(0.5, 1.0) * min(_BACKOFF_CAP_S, _BACKOFF_BASE_S * 2**attempt)

    def _translate(self, exc: Exception, status: int | None, tries: int) -> LMError:
        detail = _scrub(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, self._api_key)[:300]
        where = self.api_base or "the provider"
        if status in (401, 403):
            return LMConfigError(f"{where} rejected the API key for {self.model!r} ({status}): {detail}",
                                 model=self.model, status=status)  # fmt: skip
        if status == 404:
            return LMConfigError(f"{where} does not know model {self.model!r} (404): {detail}",
                                 model=self.model, status=status)  # fmt: skip
        if _is_network_error(exc):
            return LMUnavailableError(f"could not reach {where} for {self.model!r} after {tries} tries: {detail}",
                                      model=self.model, status=status)  # fmt: skip
        if status == 429 or (isinstance(status, int) and status >= 500):
            return LMUnavailableError(f"{where} kept failing for {self.model!r} ({status}) after {tries} tries: "
                                      f"{detail}", model=self.model, status=status)  # fmt: skip
        return LMError(
            f"{self.model!r} call failed ({type(exc).__name__}): {detail}", model=self.model, status=status
        )


_NETWORK_ERRORS = {
    "APIConnectionError",
    "APITimeoutError",
    "Timeout",
    "TransportError",
    "ConnectionError",
    "TimeoutError",
}


def _price_unknown_model_at_zero(litellm: Any, model: str) -> None:
    """Register a model litellm cannot price with cost 0.

    For an unknown model litellm searches its whole cost map for look-alikes on every call,
    about a quarter of its per-call time, to then report no cost. A zero-price entry makes
    that lookup direct and gives the same answer: cost 0.0.
    """
    try:
        litellm.get_model_info(model)
    except Exception:  # noqa: BLE001 - "not mapped" comes as various exception types
        log.debug("litellm has no price for %s: registering it at cost 0", model)
    else:
        return
    quiet = logging.getLogger("LiteLLM")
    level, quiet.level = quiet.level, logging.ERROR  # it warns that cache prices default to 0
    try:
        litellm.register_model({model: {"input_cost_per_token": 0.0, "output_cost_per_token": 0.0, "mode": "chat",
                                         "litellm_provider": litellm.get_llm_provider(model)[1]}})  # fmt: skip
    finally:
        quiet.level = level


def _is_network_error(exc: BaseException) -> bool:
    """True when the server was never reached or never answered (litellm may wrap that as a 500)."""
    seen = 0
    while exc is not None and seen < 8:  # walk the cause chain: litellm -> openai -> httpx -> OSError
        if any(cls.__name__ in _NETWORK_ERRORS for cls in type(exc).__mro__):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def _retry_after_s(exc: Exception) -> float | None:
    headers = getattr(exc, "litellm_response_headers", None) or getattr(
        getattr(exc, "response", None), "headers", None
    )
    if not headers:
        return None
    try:
        if (ms := headers.get("retry-after-ms")) is not None:
            return max(0.0, float(ms) / 1000)
        if (seconds := headers.get("retry-after")) is not None:
            return max(0.0, float(seconds))
    except (TypeError, ValueError):  # an HTTP date: fall back to our own backoff
        return None
    return None


def _scrub(text: str, secret: str | None) -> str:
    text = re.sub(r"(sk-|Bearer )[A-Za-z0-9_\-]{6,}", r"\1***", text)
    return text.replace(secret, "***") if secret and secret != _PLACEHOLDER_KEY else text


@contextlib.contextmanager
def _without_logging_worker(litellm: Any):
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


# -- the default LM --------------------------------------------------------------------
_configured: LM | None = None


def configure(lm: LM | Any | str | None) -> None:
    """Set (or with None, clear) the LM that rlmkit uses when none is passed."""
    global _configured
    _configured = None if lm is None else resolve_lm(lm)


# With no LM configured, a provider key in the environment picks that provider (first match).
PROVIDER_DEFAULTS = (
    ("OPENAI_API_KEY", "openai/gpt-5-mini"),
    ("ANTHROPIC_API_KEY", "anthropic/claude-haiku-4-5"),
    ("GEMINI_API_KEY", "gemini/gemini-2.5-flash"),
)


@functools.lru_cache(maxsize=8)
def _from_env(model: str) -> LM:
    """One LM per environment-chosen model, so repeated resolution shares cache and limits."""
    return LM(model)


def resolve_lm(lm: LM | Any | str | None) -> LM:
    """An rlmkit LM from an LM, a dspy.LM, a model string, or None (the configured default).

    None picks, in order: ``dspy.settings.lm``, ``rlmkit.configure()``'s LM, ``$RLMKIT_MODEL``,
    a provider whose key is in the environment (``PROVIDER_DEFAULTS``), else the embedded
    local model (announced once on stderr).
    """
    if isinstance(lm, LM):
        return lm
    if isinstance(lm, str):
        return LM(lm)
    if lm is not None:
        if hasattr(lm, "model") and hasattr(lm, "kwargs"):
            return LM.from_dspy(lm)
        raise UserError(f"lm must be an rlmkit.LM, a dspy.LM or a model string, got {type(lm).__name__}")
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
        return _from_env(model)
    return _embedded()


@functools.lru_cache(maxsize=1)
def _embedded() -> LM:
    """The embedded model's LM, built (and announced) once per process."""
    from rlmkit.local import local_lm

    log.warning("rlmkit: no LM configured; using the embedded local model (Qwen2.5-Coder-1.5B). "
                "Pass lm=... or call rlmkit.configure(...) to use another.")  # fmt: skip
    return local_lm()


__all__ = ["LM", "Completion", "ConcurrencyLimit", "configure", "resolve_lm"]

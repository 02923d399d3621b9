"""An in-process model: a Python function from messages to a reply, sync or async.

    def model(messages, request):               # or: async def; or a one-argument function
        return "```repl\\nSUBMIT(answer='42')\\n```"

    lm = rlmkit.FunctionLM(model)               # an ordinary rlmkit.LM: retries, cost, limits
    rlmkit.RLM("context -> answer", lm=lm)(context="...")

The function may return a str (the reply text), a ``ModelReply`` (to set tokens or the
finish reason), or raise ``ProviderError`` (e.g. ``ProviderError("busy", status=429)``)
to exercise retries. A sync function runs on the event loop: keep it quick, or make it
``async def`` if it waits.

``block_model_requests()`` (a switch for test suites, like pydantic-ai's
``ALLOW_MODEL_REQUESTS = False``) makes every non-function transport refuse to send.
"""

from __future__ import annotations

import contextlib
import inspect
import os
from collections.abc import Callable, Iterator

from rlmkit.errors import UserError
from rlmkit.models.transports.base import ModelReply, ModelRequest

ENV_SWITCH = "RLMKIT_ALLOW_MODEL_REQUESTS"  # "0": refuse real requests, e.g. set for a whole CI job
_allowed: list[bool] = [True]


class ModelRequestsBlocked(UserError):
    """A real model request was made while model requests are blocked (see ``block_model_requests``)."""


def model_requests_allowed() -> bool:
    return _allowed[-1] and os.environ.get(ENV_SWITCH, "1").strip().lower() not in ("0", "false", "no")


def set_model_requests_allowed(allowed: bool) -> None:
    """Allow or refuse real model requests for the whole process (function models always answer)."""
    _allowed[-1] = bool(allowed)


@contextlib.contextmanager
def block_model_requests(blocked: bool = True) -> Iterator[None]:
    """Within the block, a request to a real model raises ``ModelRequestsBlocked`` before it is sent."""
    _allowed.append(not blocked)
    try:
        yield
    finally:
        _allowed.pop()


def approx_tokens(text: str) -> int:
    return max(1, len(text) // 4)


class FunctionTransport:
    """Calls ``fn(messages, request)`` (or ``fn(messages)``) in process; never refused by the switch."""

    name = "function"

    def __init__(self, fn: Callable[..., object]):
        if not callable(fn):
            raise UserError(f"FunctionLM needs a callable, got {type(fn).__name__}")
        self.fn = fn
        try:
            params = inspect.signature(fn).parameters.values()
            self._takes_request = sum(
                p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params
            ) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in params)
        except (TypeError, ValueError):  # a builtin without a signature: messages only
            self._takes_request = False

    def __repr__(self) -> str:
        return f"FunctionTransport({getattr(self.fn, '__qualname__', self.fn)!r})"

    async def complete(self, request: ModelRequest) -> ModelReply:
        result = self.fn(request.messages, request) if self._takes_request else self.fn(request.messages)
        if inspect.isawaitable(result):
            result = await result
        if isinstance(result, ModelReply):
            return result
        if not isinstance(result, str):
            raise UserError(
                f"a FunctionLM function must return a str or ModelReply, got {type(result).__name__}"
            )
        prompt = sum(approx_tokens(str(m.get("content") or "")) for m in request.messages)
        return ModelReply(text=result, model=request.model, prompt_tokens=prompt,
                          completion_tokens=approx_tokens(result), finish_reason="stop")  # fmt: skip

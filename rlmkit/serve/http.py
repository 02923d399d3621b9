"""What every route shares over HTTP: the API key, a body read as JSON within the size limit,
OpenAI's error shape for every failure, and a client that goes away before its answer."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hmac
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from fastapi import Request

from rlmkit.serve.errors import APIError, bad_request, from_exception
from rlmkit.serve.state import serving

T = TypeVar("T")


def authorize(request: Request) -> None:
    """The dependency of every route but health's: ``Authorization: Bearer <key>`` when the app
    has a key (compared in constant time)."""
    key = serving(request).options.api_key
    if key is None:
        return
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(token.encode(), key.encode()):
        raise APIError(
            401,
            "a valid API key is required: Authorization: Bearer <key>",
            type="authentication_error",
            code="invalid_api_key",
            headers={"WWW-Authenticate": "Bearer"},
        )


async def read_json(request: Request) -> Any:
    """The body, decoded; past the app's size limit a 413 (read no further), malformed a 400.
    Bodies are read here, not by FastAPI's models, so a bad one gets OpenAI's error shape."""
    limit = serving(request).options.max_body_bytes
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise APIError(413, f"the body is over {limit:,} bytes", code="body_too_large")
    body = bytearray()
    async for part in request.stream():
        body += part
        if len(body) > limit:
            raise APIError(413, f"the body is over {limit:,} bytes", code="body_too_large")
    try:
        return json.loads(body)
    except ValueError as exc:
        raise bad_request(f"malformed JSON: {exc}", code="invalid_json") from exc


def openai_errors(route: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    """A route whose failures all reach the client as ``APIError`` responses. (A handler for
    ``Exception`` itself runs in Starlette's outermost middleware, which re-raises after
    answering, and uvicorn then drops the connection the client would reuse.)"""

    @functools.wraps(route)
    async def wrapped(*args: Any, **kwargs: Any) -> T:
        try:
            return await route(*args, **kwargs)
        except APIError:
            raise
        except Exception as exc:  # noqa: BLE001 - each kind gets its status in from_exception
            raise from_exception(exc) from exc

    return wrapped


async def unless_disconnected(request: Request, work: Awaitable[T]) -> T:
    """``work``'s result; if the client goes away first, the call is cancelled (its sandbox freed)."""
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
        if not task.done():
            task.cancel()
            request.state.call.status = 499
            with contextlib.suppress(BaseException):
                await task
            raise APIError(499, "the client closed the request", code="client_closed")
        return task.result()
    finally:
        gone.cancel()
        if not task.done():
            task.cancel()


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass

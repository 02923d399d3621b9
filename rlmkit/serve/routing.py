"""What the routes share: OpenAI's error shape for every failure, the model check, a call's
slot in the queue and its session, and a client that goes away before its answer."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fastapi import Request
from starlette.responses import StreamingResponse

from rlmkit.serve.admission import Admission
from rlmkit.serve.errors import APIError, from_exception
from rlmkit.serve.program import Program
from rlmkit.serve.sessions import Sessions


def known_model(program: Program, model: str) -> None:
    if model != program.name:
        raise APIError(
            404,
            f"the model {model!r} does not exist here; this server serves {program.name!r}",
            code="model_not_found",
            param="model",
        )


def openai_errors(route: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """A route whose failures all reach the client as ``APIError`` responses. (A handler for
    ``Exception`` itself runs in Starlette's outermost middleware, which re-raises after
    answering, and uvicorn then drops the connection the client would reuse.)"""

    @functools.wraps(route)
    async def wrapped(*args: Any, **kwargs: Any) -> Any:
        try:
            return await route(*args, **kwargs)
        except APIError:
            raise
        except Exception as exc:  # noqa: BLE001 - each kind gets its status in from_exception
            raise from_exception(exc) from exc

    return wrapped


@contextlib.asynccontextmanager
async def in_call(sessions: Sessions, session_id: str | None):
    """A session in a call is never ended as idle under it."""
    if session_id is None:
        yield
        return
    sessions.in_call.add(session_id)
    try:
        yield
    finally:
        sessions.in_call.discard(session_id)
        sessions.touch(session_id)


def streamed(
    admission: Admission, sessions: Sessions, session_id: str | None, events: AsyncIterator[bytes]
) -> StreamingResponse:
    """A streamed call's response: server-sent events, sent on as written (nginx included)."""
    admission.check()  # a full queue is a 429 before any byte; the slot is taken as it streams
    return StreamingResponse(
        admitted_stream(admission, sessions, session_id, events),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def admitted_stream(
    admission: Admission, sessions: Sessions, session_id: str | None, events: AsyncIterator[bytes]
) -> AsyncIterator[bytes]:
    """The events of a streamed call, once it has a slot (past the queue: a 429 before any byte)."""
    async with admission.slot(check=False), in_call(sessions, session_id):
        async for event in events:
            yield event


async def unless_disconnected(request: Request, work: Any) -> Any:
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

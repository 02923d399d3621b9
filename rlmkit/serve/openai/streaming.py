"""A call's place while it runs: its slot in the admission queue and its session kept from the
idle reaper; a streamed call's response, sent on as written."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from starlette.responses import StreamingResponse

from rlmkit.serve.admission import Admission
from rlmkit.serve.sessions import Sessions


@contextlib.asynccontextmanager
async def in_call(sessions: Sessions, session_id: str | None) -> AsyncIterator[None]:
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

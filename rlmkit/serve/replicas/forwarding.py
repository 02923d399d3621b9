"""A request handed from the front door to a replica, and run there through the ASGI app in
process: what the replicas of ``rlmkit serve --replicas`` do (Ray Serve carries the parts).

The front door reads the body once and names the session the request belongs to
(``session_key``), so the router can send it to the replica that holds that session's REPL. The
replica answers as a stream of parts: first ``(status, headers)``, then the body's chunks as the
app writes them, so a streamed call stays streamed through the hop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from rlmkit.serve.errors import APIError
from rlmkit.serve.openai.stored import session_of
from rlmkit.serve.session_choice import (
    NO_SESSION,
    OPEN_SESSION_HEADER,
    SessionChoice,
    choose_session,
    read_ask,
)

OPENING_PATHS = ("/v1/sessions", "/v1/responses")
SESSION_PATH = re.compile(r"^/v1/sessions/([^/]+)$")
RESPONSE_PATH = re.compile(r"^/v1/responses/([^/]+)$")


@dataclass(frozen=True)
class Forwarded:
    """An HTTP request as the front door read it, and the session it belongs to (None: any
    replica may answer it)."""

    method: str
    path: str
    query: bytes = b""
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    client: tuple[str, int] | None = None
    session: str | None = None


def forwarded(method: str, path: str, query: bytes, headers: list[tuple[str, str]], body: bytes,
              client: tuple[str, int] | None) -> Forwarded:  # fmt: skip
    """The request to hand on. One that may open a session (``POST /v1/sessions``, a Responses
    call continuing none) is given the new session's id here, in ``X-RLMKit-Open-Session``: the
    router sends it to the replica that id ranks first, where its later calls will go too."""
    choice = routed_session(path, dict(headers), body, opening=method == "POST" and path in OPENING_PATHS)
    session = choice.session_id
    if choice.kind == "opened":
        session = uuid.uuid4().hex
        headers = [*headers, (OPEN_SESSION_HEADER, session)]
    return Forwarded(method, path, query, headers, body, client, session)


def session_key(path: str, headers: dict[str, str], body: bytes) -> str | None:
    """The session a request names (``routed_session``'s), or None."""
    return routed_session(path, headers, body).session_id


def routed_session(path: str, headers: dict[str, str], body: bytes, opening: bool = False) -> SessionChoice:
    """The session a request runs in, by the app's own rule (``session_choice``): the one in its
    path (``/v1/sessions/{id}``, a response id that carries one), else the one its body and
    headers name (``session``, ``X-RLMKit-Session``, the session a ``previous_response_id``
    carries), else, for an ``opening`` request, a fresh one. No session for anything else, a bad
    body included (the replica answering says what is wrong with it)."""
    if found := SESSION_PATH.match(path):
        return SessionChoice("named", found.group(1))
    if found := RESPONSE_PATH.match(path):
        return SessionChoice("continued", session_of(found.group(1)))
    decoded: Any = None
    if body[:1] == b"{":
        with contextlib.suppress(ValueError):
            decoded = json.loads(body)
    try:
        ask = read_ask(decoded if isinstance(decoded, dict) else {}, headers)
    except APIError:
        return NO_SESSION
    previous = session_of(ask.previous_response_id) if ask.previous_response_id else None
    return choose_session(ask, previous_session=previous, may_open=opening)


async def respond(
    app: Any, request: Forwarded, extra_headers: Sequence[tuple[str, str]] = ()
) -> AsyncIterator[Any]:
    """Run ``request`` through the ASGI ``app``: yields ``(status, headers)``, then body chunks.
    Closing the stream early (the client went away) tells the app the client disconnected, as a
    dropped connection would."""
    messages: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
    gone = asyncio.Event()
    body_sent = False

    async def receive() -> dict[str, Any]:
        nonlocal body_sent
        if not body_sent:
            body_sent = True
            return {"type": "http.request", "body": request.body, "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        await messages.put(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": request.method,
        "scheme": "http",
        "path": request.path,
        "raw_path": request.path.encode(),
        "root_path": "",
        "query_string": request.query,
        "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in request.headers],
        "client": request.client,
        "server": None,
    }
    running = asyncio.create_task(app(scope, receive, send))
    running.add_done_callback(lambda _: messages.put_nowait(None))
    try:
        while (message := await messages.get()) is not None:
            if message["type"] == "http.response.start":
                headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in message.get("headers", [])]
                yield message["status"], headers + list(extra_headers)
            elif message["type"] == "http.response.body":
                if message.get("body"):
                    yield message["body"]
                if not message.get("more_body"):
                    break
        if running.done():
            running.result()  # the app's own failure, raised here (it answers errors itself)
    finally:
        gone.set()
        if not running.done():
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(running, 5.0)  # it sees the disconnect and ends its call

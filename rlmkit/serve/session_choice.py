"""Which session a request runs in: the one rule, read by the app's routes and by the replicas'
front door (which must send a session's calls to the replica holding its REPL).

A request names its session in four ways, read here and nowhere else: the ``session`` field of
its body (``extra_body``), the ``X-RLMKit-Session`` header, ``previous_response_id`` (a
Responses follow-up runs in the session of the response it continues; a ``compaction`` item in
its ``input`` stands for the compacted response's id), or the results it gives of a paused run's
tool calls (each call's id names the session whose run waits on it). A Responses call that
names none may open a fresh one (``X-RLMKit-Open-Session``: the id the front door minted for it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from rlmkit.serve.errors import bad_request
from rlmkit.serve.tool_results import ToolResults, tool_results

SESSION_HEADER = "x-rlmkit-session"  # the session a call runs in, for clients that cannot send a body field
OPEN_SESSION_HEADER = "x-rlmkit-open-session"  # the id a session a request opens takes (replicas)


@dataclass(frozen=True)
class SessionAsk:
    """What one request says of its session."""

    session: str | None = None  # the body's ``session``, else the header's
    previous_response_id: str | None = None
    open_as: str | None = None  # the id a session opened for it takes (None: a new id)
    tool_results: ToolResults | None = None  # the client's results of a paused run's tool calls


@dataclass(frozen=True)
class SessionChoice:
    """Where a request runs. ``named``: the session it names; ``continued``: the session of the
    response it continues (``session_id`` None: that response kept no REPL); ``opened``: a fresh
    one, taking ``session_id`` when given; ``none``: no session (a plain call)."""

    kind: Literal["none", "named", "continued", "opened"]
    session_id: str | None = None


NO_SESSION = SessionChoice("none")


def read_ask(body: Mapping[str, Any], headers: Mapping[str, str]) -> SessionAsk:
    """The session fields of a decoded body and its headers, checked (400 naming the field)."""
    session, previous = body.get("session"), body.get("previous_response_id")
    if session is not None and not isinstance(session, str):
        raise bad_request("'session' must be a session id (a string)", param="session")
    if previous is not None and not isinstance(previous, str):
        raise bad_request("'previous_response_id' must be a response id", param="previous_response_id")
    if previous is None:  # a compaction item handed back names the response it continues
        previous = _compacted(body.get("input"))
    if previous is not None and session is not None:
        raise bad_request("give 'previous_response_id' or 'session', not both", param="session")
    return SessionAsk(
        session or headers.get(SESSION_HEADER), previous, headers.get(OPEN_SESSION_HEADER), tool_results(body)
    )


def _compacted(items: Any) -> str | None:
    """The response a ``compaction`` item in ``input`` stands for (``/v1/responses/compact``'s)."""
    if not isinstance(items, list):
        return None
    for item in items:
        if isinstance(item, dict) and item.get("type") == "compaction":
            content = item.get("encrypted_content")
            if not isinstance(content, str):
                raise bad_request("a compaction item's encrypted_content must be a string", param="input")
            return content
    return None


def choose_session(ask: SessionAsk, *, previous_session: str | None, may_open: bool) -> SessionChoice:
    """The session ``ask`` runs in. ``previous_session``: the session the response named by
    ``previous_response_id`` ran in (the caller looks it up: the app in the responses it keeps,
    the front door in the id); ``may_open``: whether a call naming none opens one (a stored
    Responses call of an RLM). A follow-up goes before the header: the response says where its
    REPL is; then tool results: their call ids say which session's run waits on them."""
    if ask.previous_response_id is not None:
        return SessionChoice("continued", previous_session)
    if ask.tool_results is not None and ask.tool_results.session_id is not None:
        return SessionChoice("named", ask.tool_results.session_id)
    if ask.session:
        return SessionChoice("named", ask.session)
    if may_open:
        return SessionChoice("opened", ask.open_as)
    return NO_SESSION

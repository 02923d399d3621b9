"""The Responses API's routes: ``POST /v1/responses``, ``GET`` and ``DELETE /v1/responses/{id}``
(the shapes and the stream are ``responses.py``'s)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from rlmkit.errors import ConfigError
from rlmkit.serve import responses
from rlmkit.serve.admission import Admission
from rlmkit.serve.chat import Call, CallRecord
from rlmkit.serve.errors import APIError, bad_request
from rlmkit.serve.mapping import check_inputs, map_inputs, question_field_of
from rlmkit.serve.program import Program
from rlmkit.serve.routing import in_call, known_model, openai_errors, streamed, unless_disconnected
from rlmkit.serve.sessions import OPEN_SESSION_HEADER, Sessions


def add_responses_routes(
    keyed: APIRouter,
    *,
    loaded: Callable[[], Program],
    read_json: Callable[[Request], Awaitable[Any]],
    sessions: Sessions,
    admission: Admission,
    kept: responses.StoredResponses,
) -> None:
    """The routes on ``keyed`` (the router whose routes take the API key)."""

    @keyed.post("/v1/responses")
    @openai_errors
    async def create_response(request: Request) -> Response:
        program = loaded()
        asked = responses.parse(await read_json(request))
        known_model(program, asked.chat.model)
        record = CallRecord(request_id=request.state.request_id)
        request.state.call = record
        session, first = await response_session(program, asked, request.headers.get(OPEN_SESSION_HEADER))
        opened = session.id if first is not None else None
        session_id = record.session_id = session.id if session is not None else None
        if session_id in sessions.in_call and opened is None:
            raise APIError(409, "this session is running another call", code="session_busy", param="session")
        try:
            call = responses.ResponsesCall(Call(program, asked.chat, record, session, first), asked)
        except BaseException:
            if opened is not None:  # its first call never ran: nothing to keep
                await sessions.delete(opened)
            raise

        def keep(body: dict[str, Any]) -> None:
            if asked.store:
                kept.put(call.id, responses.Stored(body, session_id))

        if asked.chat.stream:
            return streamed(admission, sessions, session_id, call.events(keep))
        try:
            async with admission.slot(), in_call(sessions, session_id):
                text, body = await unless_disconnected(request, call.answer())
        except BaseException:
            if opened is not None:
                await sessions.delete(opened)
            raise
        keep(body)
        return Response(text, media_type="application/json")

    async def response_session(
        program: Program, asked: responses.ResponsesRequest, new_id: str | None
    ) -> tuple[Any, dict[str, Any] | None]:
        """The session a response runs in, and, when it was opened for it, the call's inputs. A
        follow-up runs in its previous response's session; a stored response of an RLM in a new
        one, holding every input of the call but its question, which the call is given."""
        previous = asked.previous_response_id
        if previous is not None:
            stored = kept_or_carried(previous)
            if stored.session_id is None:
                raise bad_request(
                    f"response {previous!r} kept no REPL to continue (stored without a session: run with "
                    "no budget, by a program that is an rlmkit.RLM with a worker sandbox)",
                    param="previous_response_id",
                )
            try:
                return await sessions.get(stored.session_id), None
            except APIError as exc:
                if exc.status != 404:  # e.g. the session cap: said as it is
                    raise
                raise APIError(
                    404,
                    f"the REPL of response {previous!r} has ended (idle past the timeout, or ended to make "
                    "room): start again without previous_response_id",
                    code="response_not_found",
                    param="previous_response_id",
                ) from exc
        if asked.chat.session is not None:
            return await sessions.get(asked.chat.session), None
        if not asked.store or asked.chat.budget or not program.is_rlm:
            return None, None
        question = question_field_of(program, check_inputs(program, asked.chat.inputs))
        inputs = map_inputs(program, asked.chat)  # a request that cannot run opens nothing
        try:
            kept_inputs = {k: v for k, v in inputs.items() if k != question}
            session = await sessions.open(kept_inputs, evictable=True, session_id=new_id)
        except ConfigError:  # a sandbox that holds no session: answered, and kept without a REPL
            return None, None
        return session, {k: v for k, v in inputs.items() if k == question}

    def kept_or_carried(previous: str) -> responses.Stored:
        """The response kept here, else the session its id carries when that session is live or
        saved (the response was kept by another replica, or before a restart); else a 404."""
        try:
            return kept.get(previous, param="previous_response_id")
        except APIError:
            carried = responses.session_of(previous)
            if previous in kept.deleted or carried is None:
                raise
            if not (carried in sessions.live or sessions.saved(carried)):
                raise
            return responses.Stored({}, carried)

    @keyed.get("/v1/responses/{response_id}")
    @openai_errors
    async def get_response(response_id: str) -> dict[str, Any]:
        loaded()
        return kept.get(response_id).body

    @keyed.delete("/v1/responses/{response_id}")
    @openai_errors
    async def delete_response(response_id: str) -> dict[str, Any]:
        loaded()
        kept.delete(response_id)
        return {"id": response_id, "object": "response", "deleted": True}

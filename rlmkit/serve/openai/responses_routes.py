"""The Responses API's routes: ``POST /v1/responses``, ``GET`` and ``DELETE /v1/responses/{id}``
(the shapes and the stream are ``responses.py``'s). Module-level handlers, as ``routes.py``'s."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from rlmkit.errors import ConfigError
from rlmkit.serve.errors import APIError, bad_request
from rlmkit.serve.http import openai_errors, read_json, unless_disconnected
from rlmkit.serve.openai import responses_request
from rlmkit.serve.openai.chat import Call, CallRecord
from rlmkit.serve.openai.mapping import check_inputs, map_inputs, question_field_of
from rlmkit.serve.openai.responses import ResponsesCall
from rlmkit.serve.openai.responses_request import ResponsesRequest
from rlmkit.serve.openai.routes import busy, known_model
from rlmkit.serve.openai.stored import Stored, session_of
from rlmkit.serve.openai.streaming import in_call, streamed
from rlmkit.serve.program import Program
from rlmkit.serve.session_choice import SessionChoice, choose_session
from rlmkit.serve.state import ServeState, loaded_program, serving
from rlmkit.session import Session

router = APIRouter()


@router.post("/v1/responses")
@openai_errors
async def create_response(
    request: Request, state: ServeState = Depends(serving), program: Program = Depends(loaded_program)
) -> Response:
    asked = responses_request.parse(await read_json(request), request.headers)
    known_model(program, asked.chat.model)
    record = CallRecord(request_id=request.state.request_id)
    request.state.call = record
    choice = choose_session(
        asked.chat.ask,
        previous_session=previous_session(state, asked.previous_response_id),
        may_open=asked.store and not asked.chat.budget and program.is_rlm,
    )
    session, first = await enter_session(state, program, asked, choice)
    opened = session.id if first is not None and session is not None else None
    session_id = record.session_id = session.id if session is not None else None
    if session_id in state.sessions.in_call and opened is None:
        raise busy()
    try:
        call = ResponsesCall(Call(program, asked.chat, record, session, first), asked)
    except BaseException:
        if opened is not None:  # its first call never ran: nothing to keep
            await state.sessions.delete(opened)
        raise

    def keep(body: dict[str, Any]) -> None:
        if asked.store:
            state.kept.put(call.id, Stored(body, session_id))

    if asked.chat.stream:
        return streamed(state.admission, state.sessions, session_id, call.events(keep))
    try:
        async with state.admission.slot(), in_call(state.sessions, session_id):
            text, body = await unless_disconnected(request, call.answer())
    except BaseException:
        if opened is not None:
            await state.sessions.delete(opened)
        raise
    keep(body)
    return Response(text, media_type="application/json")


def previous_session(state: ServeState, previous: str | None) -> str | None:
    """The session the response ``previous`` ran in: kept here, else the one its id carries when
    that session is live or saved (the response was kept by another replica, or before a
    restart); a 404 when there is neither, a 400 when it kept no REPL."""
    if previous is None:
        return None
    try:
        stored = state.kept.get(previous, param="previous_response_id")
    except APIError:
        carried = session_of(previous)
        if previous in state.kept.deleted or carried is None:
            raise
        if not (carried in state.sessions.live or state.sessions.saved(carried)):
            raise
        return carried
    if stored.session_id is None:
        raise bad_request(
            f"response {previous!r} kept no REPL to continue (stored without a session: run with "
            "no budget, by a program that is an rlmkit.RLM with a worker sandbox)",
            param="previous_response_id",
        )
    return stored.session_id


async def enter_session(
    state: ServeState, program: Program, asked: ResponsesRequest, choice: SessionChoice
) -> tuple[Session | None, dict[str, Any] | None]:
    """The session ``choice`` names, and, when it is opened for this call, the call's inputs: a
    fresh session holds every input of the call but its question, which the call is given."""
    sessions = state.sessions
    if choice.kind == "continued" and choice.session_id is not None:
        try:
            return await sessions.get(choice.session_id), None
        except APIError as exc:
            if exc.status != 404:  # e.g. the session cap: said as it is
                raise
            raise APIError(
                404,
                f"the REPL of response {asked.previous_response_id!r} has ended (idle past the timeout, "
                "or ended to make room): start again without previous_response_id",
                code="response_not_found",
                param="previous_response_id",
            ) from exc
    if choice.kind == "named" and choice.session_id is not None:
        return await sessions.get(choice.session_id), None
    if choice.kind != "opened":
        return None, None
    question = question_field_of(program, check_inputs(program, asked.chat.inputs))
    inputs = map_inputs(program, asked.chat)  # a request that cannot run opens nothing
    try:
        kept_inputs = {k: v for k, v in inputs.items() if k != question}
        session = await sessions.open(kept_inputs, evictable=True, session_id=choice.session_id)
    except ConfigError:  # a sandbox that holds no session: answered, and kept without a REPL
        return None, None
    return session, {k: v for k, v in inputs.items() if k == question}


@router.get("/v1/responses/{response_id}")
@openai_errors
async def get_response(response_id: str, state: ServeState = Depends(serving)) -> dict[str, Any]:
    state.program()
    return state.kept.get(response_id).body


@router.delete("/v1/responses/{response_id}")
@openai_errors
async def delete_response(response_id: str, state: ServeState = Depends(serving)) -> dict[str, Any]:
    state.program()
    state.kept.delete(response_id)
    return {"id": response_id, "object": "response", "deleted": True}

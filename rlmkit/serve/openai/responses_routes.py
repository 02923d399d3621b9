"""The Responses API's routes: ``POST /v1/responses``, ``GET`` and ``DELETE /v1/responses/{id}``
(the shapes and the stream are ``responses.py``'s). Module-level handlers, as ``routes.py``'s."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from starlette.responses import JSONResponse, Response

from rlmkit.serve.errors import APIError, bad_request
from rlmkit.serve.http import openai_errors, read_json, unless_disconnected
from rlmkit.serve.openai import client_tools, responses_request
from rlmkit.serve.openai.chat import Call, CallRecord
from rlmkit.serve.openai.responses import ResponsesCall
from rlmkit.serve.openai.routes import busy, known_model
from rlmkit.serve.openai.session_entry import enter_session
from rlmkit.serve.openai.stored import Stored, session_of
from rlmkit.serve.openai.streaming import in_call, streamed
from rlmkit.serve.program import Program
from rlmkit.serve.session_choice import choose_session
from rlmkit.serve.state import ServeState, loaded_program, serving

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
    session, first = await enter_session(state, program, asked.chat, choice)
    opened = session.id if first is not None and session is not None else None
    session_id = record.session_id = session.id if session is not None else None
    if session_id in state.sessions.in_call and opened is None:
        raise busy()
    if asked.tool_results is not None:
        first = {}  # the run waiting on them has its inputs: nothing is mapped again
    try:
        call = ResponsesCall(Call(program, asked.chat, record, session, first), asked)
        if asked.starts_a_run:
            return await started(request, state, call, opened)
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


async def started(request: Request, state: ServeState, call: ResponsesCall, opened: str | None) -> Response:
    """A call that runs as a started session run: with client tools (it may pause at a call of
    one, answered by a ``function_call`` item), resuming a paused one (the request gives tool
    results), or in the background (answered at once, ``queued``)."""
    asked, session = call.request, call.call.session
    if session is None:
        raise bad_request(
            "client tools and background responses run in a session: they need a stored response "
            "(no 'store: false', no 'budget') of a program that is an rlmkit.RLM with a worker sandbox",
            param="background" if asked.background else "tools",
        )
    if asked.chat.stream:
        raise bad_request("a response with client tools is not streamed: drop 'stream'", param="stream")
    results = asked.tool_results
    if results is not None:
        run = client_tools.resume(session, results)
    else:
        if asked.background:
            state.background.admit()
        slots = state.background.slots if asked.background else None
        run = client_tools.start(session, call.call.inputs, asked.tools, slots)
    if asked.background:
        body = call.response([], status="queued").model_dump(mode="json", exclude_unset=True)
        state.kept.put(call.id, Stored(body, session.id))
        state.background.watch(
            call.id, run, lambda outcome: call.outcome_body(run, outcome), state.kept, session.id
        )
        return JSONResponse(body)
    try:
        async with state.admission.slot(), in_call(state.sessions, session.id):
            outcome = await unless_disconnected(request, client_tools.step(run))
    except BaseException:
        if opened is not None and run.trajectory is None:  # it never began: nothing to keep
            await state.sessions.delete(opened)
        raise
    body = call.outcome_body(run, outcome)
    state.kept.put(call.id, Stored(body, session.id))
    return JSONResponse(body)


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


@router.get("/v1/responses/{response_id}")
@openai_errors
async def get_response(response_id: str, state: ServeState = Depends(serving)) -> dict[str, Any]:
    state.program()
    return current(state, response_id)


def current(state: ServeState, response_id: str) -> dict[str, Any]:
    """A kept response as it is now: a background one still running says how far it is."""
    body = state.kept.get(response_id).body
    status = state.background.status(response_id)
    return body if status is None else {**body, "status": status}


@router.post("/v1/responses/{response_id}/cancel")
@openai_errors
async def cancel_response(response_id: str, state: ServeState = Depends(serving)) -> dict[str, Any]:
    """Stop a background response's run between turns; the response, as it is now (``cancelled``
    once the turn in flight has finished). One that is over is returned as it ended."""
    state.program()
    body = current(state, response_id)
    if not state.background.cancel(response_id) and not body.get("background"):
        raise bad_request("only a background response can be cancelled", param="response_id")
    return current(state, response_id)


@router.delete("/v1/responses/{response_id}")
@openai_errors
async def delete_response(response_id: str, state: ServeState = Depends(serving)) -> dict[str, Any]:
    state.program()
    state.kept.delete(response_id)
    return {"id": response_id, "object": "response", "deleted": True}

"""The OpenAI routes but the Responses API's: ``GET /v1/models`` (and one model) and
``POST /v1/chat/completions`` (``stream``: server-sent events). Module-level handlers: each takes
what the app shares (``ServeState``) and the loaded program as dependencies."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from openai.types import Model
from starlette.responses import Response

from rlmkit.serve.errors import APIError, bad_request
from rlmkit.serve.http import openai_errors, read_json, unless_disconnected
from rlmkit.serve.openai import client_tools
from rlmkit.serve.openai.chat import Call, CallRecord
from rlmkit.serve.openai.chat_chunks import completion, dump
from rlmkit.serve.openai.client_tools import chat_tool_call
from rlmkit.serve.openai.mapping import ChatRequest, content_of, parse_request
from rlmkit.serve.openai.session_entry import enter_session
from rlmkit.serve.openai.streaming import in_call, streamed
from rlmkit.serve.program import Program
from rlmkit.serve.reasoning import reasoning_turns
from rlmkit.serve.session_choice import choose_session
from rlmkit.serve.state import ServeState, loaded_program, serving
from rlmkit.session import PendingToolCall

router = APIRouter()


def known_model(program: Program, model: str) -> None:
    if model != program.name:
        raise APIError(
            404,
            f"the model {model!r} does not exist here; this server serves {program.name!r}",
            code="model_not_found",
            param="model",
        )


def busy() -> APIError:
    return APIError(409, "this session is running another call", code="session_busy", param="session")


def model_card(program: Program) -> dict[str, Any]:
    card = Model(id=program.name, created=program.created, object="model", owned_by="rlmkit")
    return card.model_dump()


@router.get("/v1/models")
@openai_errors
async def list_models(program: Program = Depends(loaded_program)) -> dict[str, Any]:
    return {"object": "list", "data": [model_card(program)]}


@router.get("/v1/models/{model_id}")
@openai_errors
async def get_model(model_id: str, program: Program = Depends(loaded_program)) -> dict[str, Any]:
    known_model(program, model_id)
    return model_card(program)


@router.post("/v1/chat/completions")
@openai_errors
async def chat_completions(
    request: Request, state: ServeState = Depends(serving), program: Program = Depends(loaded_program)
) -> Response:
    chat = parse_request(await read_json(request), request.headers)
    known_model(program, chat.model)
    record = CallRecord(request_id=request.state.request_id)
    request.state.call = record
    if chat.tools or chat.tool_results is not None:
        return await with_client_tools(request, state, program, chat, record)
    choice = choose_session(chat.ask, previous_session=None, may_open=False)  # chat opens none
    session_id = record.session_id = choice.session_id
    session = await state.sessions.get(session_id) if session_id else None
    if session_id in state.sessions.in_call:  # said now, not as an error inside a stream already begun
        raise busy()
    call = Call(program, chat, record, session)
    if chat.stream:
        return streamed(state.admission, state.sessions, session_id, call.events())
    async with state.admission.slot(), in_call(state.sessions, session_id):
        body = await unless_disconnected(request, call.answer())
        return Response(body, media_type="application/json")


async def with_client_tools(
    request: Request, state: ServeState, program: Program, chat: ChatRequest, record: CallRecord
) -> Response:
    """A chat call whose run may pause at a call of the client's tools (answered with
    ``finish_reason: "tool_calls"``), or one whose ``tool`` messages resume such a run. It runs in
    a session: the one it names or its tool calls name, else one opened for it."""
    may_open = program.is_rlm and not chat.budget
    choice = choose_session(chat.ask, previous_session=None, may_open=may_open)
    session, first = await enter_session(state, program, chat, choice)
    if session is None:
        raise bad_request(
            "client tools run in a session: they need a program that is an rlmkit.RLM with a worker "
            "sandbox, and no 'budget'",
            param="tools",
        )
    if chat.stream:
        raise bad_request("a chat call with client tools is not streamed: drop 'stream'", param="stream")
    record.session_id = session.id
    if session.id in state.sessions.in_call:
        raise busy()
    results = chat.tool_results
    call = Call(program, chat, record, session, {} if results is not None else first)
    run = (
        client_tools.resume(session, results)
        if results
        else client_tools.start(session, call.inputs, chat.tools)
    )
    try:
        async with state.admission.slot(), in_call(state.sessions, session.id):
            outcome = await unless_disconnected(request, client_tools.step(run))
    except BaseException:
        if first is not None and run.trajectory is None:  # opened for a call that never began
            await state.sessions.delete(session.id)
        raise
    trajectory = run.trajectory
    told, record.usage = run.news()
    text = "".join(reasoning_turns(trajectory)[told:] if trajectory is not None else [])
    if isinstance(outcome, PendingToolCall):
        reply = completion(
            call.cid, program.name, None, text, record.usage, tool_calls=[chat_tool_call(outcome)]
        )
    else:
        reply = completion(call.cid, program.name, content_of(program, chat, outcome), text, record.usage)
    return Response(dump(reply), media_type="application/json")

"""The OpenAI routes but the Responses API's: ``GET /v1/models`` (and one model) and
``POST /v1/chat/completions`` (``stream``: server-sent events). Module-level handlers: each takes
what the app shares (``ServeState``) and the loaded program as dependencies."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from openai.types import Model
from starlette.responses import Response

from rlmkit.serve.errors import APIError
from rlmkit.serve.http import openai_errors, read_json, unless_disconnected
from rlmkit.serve.openai.chat import Call, CallRecord
from rlmkit.serve.openai.mapping import parse_request
from rlmkit.serve.openai.streaming import in_call, streamed
from rlmkit.serve.program import Program
from rlmkit.serve.session_choice import choose_session
from rlmkit.serve.state import ServeState, loaded_program, serving

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

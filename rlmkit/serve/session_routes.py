"""Sessions over HTTP: ``POST /v1/sessions``, ``GET`` and ``DELETE /v1/sessions/{id}`` (what a
session is and how it is kept: ``sessions.py``)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from starlette.responses import JSONResponse, Response

from rlmkit.serve.errors import bad_request
from rlmkit.serve.http import openai_errors, read_json
from rlmkit.serve.openai.chat import CallRecord
from rlmkit.serve.openai.mapping import check_inputs
from rlmkit.serve.program import Program
from rlmkit.serve.session_choice import OPEN_SESSION_HEADER
from rlmkit.serve.state import ServeState, loaded_program, serving

router = APIRouter()


@router.post("/v1/sessions")
@openai_errors
async def open_session(
    request: Request, state: ServeState = Depends(serving), program: Program = Depends(loaded_program)
) -> Response:
    body = await read_json(request)
    if not isinstance(body, dict) or set(body) - {"inputs"}:
        raise bad_request("a session is opened with {'inputs': {...}}", param="inputs")
    inputs = check_inputs(program, body.get("inputs") or {})
    session = await state.sessions.open(inputs, session_id=request.headers.get(OPEN_SESSION_HEADER))
    request.state.call = CallRecord(request_id=request.state.request_id, session_id=session.id)
    return JSONResponse(state.sessions.describe(session), status_code=201)


@router.get("/v1/sessions/{session_id}")
@openai_errors
async def get_session(session_id: str, state: ServeState = Depends(serving)) -> dict[str, Any]:
    state.program()
    return state.sessions.describe(await state.sessions.get(session_id))


@router.delete("/v1/sessions/{session_id}")
@openai_errors
async def delete_session(session_id: str, state: ServeState = Depends(serving)) -> dict[str, Any]:
    state.program()
    await state.sessions.delete(session_id)
    return {"id": session_id, "object": "session", "deleted": True}

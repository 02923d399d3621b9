"""``POST /v1/responses/compact``: a conversation compacted into one item a follow-up continues,
on the session's own compaction, every REPL variable kept.

- ``previous_response_id`` (or a session named as any call names one): that session's calls
  are shown summarised in its next calls' task messages from now on (``Session.compact``); its
  REPL, variables and context are as they were.
- ``input`` (messages): the conversation goes into the REPL as the program's context field, in a
  session opened for it: the RLM reads it there as it reads any long input.

The answer is the Open Responses compacted response (the openai SDK's ``CompactedResponse``):
its output is one ``compaction`` item whose ``encrypted_content`` is opaque, the id of a stored
response carrying the session. Sent back in a later request's ``input``, or that id given as
``previous_response_id``, it continues the session. No model is called: the usage is zero.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from fastapi import APIRouter, Depends, Request
from openai.types.responses import CompactedResponse
from openai.types.responses.response_compact_params import ResponseCompactParams

from rlmkit.serve.errors import bad_request
from rlmkit.serve.http import openai_errors, read_json
from rlmkit.serve.openai import responses_request
from rlmkit.serve.openai.chat import CallRecord
from rlmkit.serve.openai.mapping import check_fields
from rlmkit.serve.openai.responses import usage_of
from rlmkit.serve.openai.responses_routes import previous_session
from rlmkit.serve.openai.routes import busy, known_model
from rlmkit.serve.openai.stored import Stored, response_id
from rlmkit.serve.program import Program
from rlmkit.serve.session_choice import choose_session, read_ask
from rlmkit.serve.sessions import Sessions
from rlmkit.serve.state import ServeState, loaded_program, serving
from rlmkit.session import Session
from rlmkit.trajectory import Usage

COMPACT_FIELDS = frozenset(ResponseCompactParams.__annotations__) | {"session"}
router = APIRouter()


@router.post("/v1/responses/compact")
@openai_errors
async def compact_response(
    request: Request, state: ServeState = Depends(serving), program: Program = Depends(loaded_program)
) -> dict[str, Any]:
    body = await read_json(request)
    check_fields(body, COMPACT_FIELDS)
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise bad_request("'model' must be a non-empty string", param="model")
    known_model(program, model)
    ask = read_ask(body, request.headers)
    choice = choose_session(
        ask, previous_session=previous_session(state, ask.previous_response_id), may_open=program.is_rlm
    )
    request.state.call = CallRecord(request_id=request.state.request_id, session_id=choice.session_id)
    if choice.kind in ("continued", "named") and choice.session_id is not None:
        if body.get("input"):
            raise bad_request("compact a response (previous_response_id) or a conversation (input)", "input")
        session = await state.sessions.get(choice.session_id)
        if session.id in state.sessions.in_call:
            raise busy()
        session.compact()
    elif choice.kind == "opened":
        session = await _conversation_session(state.sessions, program, body, choice.session_id)
    else:
        raise bad_request("compaction keeps a REPL: this program is not an rlmkit.RLM", param="model")
    request.state.call.session_id = session.id
    compacted_id = response_id(session.id)  # also the compaction item's content: what a follow-up hands back
    compacted = CompactedResponse.model_validate(
        {
            "id": compacted_id,
            "object": "response.compaction",
            "created_at": int(time.time()),
            "output": [
                {"id": f"cmp_{uuid.uuid4().hex}", "type": "compaction", "encrypted_content": compacted_id}
            ],
            "usage": usage_of(Usage()),
        }
    )
    answer = compacted.model_dump(mode="json", exclude_unset=True)
    state.kept.put(compacted.id, Stored(answer, session.id))
    return answer


async def _conversation_session(
    sessions: Sessions, program: Program, body: dict[str, Any], session_id: str | None
) -> Session:
    """A session holding the conversation ``input`` (and ``instructions``) as the program's
    context field: the first text input, ``context`` when it has one."""
    asked = responses_request.parse({"model": body["model"], **_conversation(body)})
    transcript = "\n\n".join(
        f"{message['role']}: {text}" for message in asked.chat.messages for text in _texts(message)
    )
    texts = [name for name, field in program.inputs.items() if field.annotation is str]
    field = "context" if "context" in texts else (texts[0] if texts else None)
    if field is None:
        raise bad_request("this program has no text input to hold the conversation", param="input")
    return await sessions.open({field: transcript}, evictable=True, session_id=session_id)


def _conversation(body: dict[str, Any]) -> dict[str, Any]:
    if not body.get("input"):
        raise bad_request("give the conversation to compact ('input') or 'previous_response_id'", "input")
    return {name: body[name] for name in ("input", "instructions") if body.get(name) is not None}


def _texts(message: dict[str, Any]) -> list[str]:
    content = message.get("content")
    if isinstance(content, str):
        return [content]
    return [part["text"] for part in content or [] if isinstance(part.get("text"), str)]

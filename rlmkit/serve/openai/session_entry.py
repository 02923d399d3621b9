"""The session a request's choice names (``session_choice.choose_session``), entered: found live,
loaded from its directory, or opened for the call (the Responses API's stored responses, and any
call with client tools, whose run waits in a session between requests)."""

from __future__ import annotations

from typing import Any

from rlmkit.errors import ConfigError
from rlmkit.serve.errors import APIError
from rlmkit.serve.openai.mapping import ChatRequest, check_inputs, map_inputs, question_field_of
from rlmkit.serve.program import Program
from rlmkit.serve.session_choice import SessionChoice
from rlmkit.serve.state import ServeState
from rlmkit.session import Session


async def enter_session(
    state: ServeState, program: Program, chat: ChatRequest, choice: SessionChoice
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
                f"the REPL of response {chat.ask.previous_response_id!r} has ended (idle past the timeout, "
                "or ended to make room): start again without previous_response_id",
                code="response_not_found",
                param="previous_response_id",
            ) from exc
    if choice.kind == "named" and choice.session_id is not None:
        return await sessions.get(choice.session_id), None
    if choice.kind != "opened":
        return None, None
    question = question_field_of(program, check_inputs(program, chat.inputs))
    inputs = map_inputs(program, chat)  # a request that cannot run opens nothing
    try:
        kept_inputs = {k: v for k, v in inputs.items() if k != question}
        session = await sessions.open(kept_inputs, evictable=True, session_id=choice.session_id)
    except ConfigError:  # a sandbox that holds no session: answered, and kept without a REPL
        return None, None
    return session, {k: v for k, v in inputs.items() if k == question}

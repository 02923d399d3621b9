"""The client's function tools over the OpenAI APIs: the ``tools`` a request sends become REPL
functions of the run (``rlmkit.run.client_tools``), a call of one pauses it and goes back to the
client, and the client's result resumes the same live REPL.

    Responses: tools [{"type": "function", ...}]   -> a response whose output ends in a
               function_call item (call_id, name, arguments JSON), status completed;
               input [..., {"type": "function_call_output", "call_id", "output"}] resumes
    chat:      tools [{"type": "function", "function": {...}}] -> finish_reason "tool_calls",
               message.tool_calls; messages [..., assistant tool_calls, {"role": "tool"}] resumes

A run with tools lives in a session (its REPL waits between the requests): the one the request
names, else one opened for it. A tool call's id names that session
(``rlmkit.Session.of_call``), so a client that sends its whole conversation again, with no
``previous_response_id`` and no session header (as agent runtimes do), still reaches the run that
waits on it (``serve/tool_results.py`` reads the results; ``session_choice`` picks the session).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dspy
from openai.types.chat import ChatCompletionMessageFunctionToolCall
from openai.types.responses import ResponseFunctionToolCall

from rlmkit.errors import ConfigError
from rlmkit.serve.errors import APIError, bad_request
from rlmkit.serve.tool_results import ToolResults
from rlmkit.session import ClientTool, PendingToolCall, Session, client_tools
from rlmkit.session.runs import RunSlots, SessionRun


def parse_tools(value: Any, param: str = "tools") -> tuple[ClientTool, ...]:
    """A request's ``tools``: function tools only (400 naming what is wrong)."""
    if value is None or value == []:
        return ()
    if not isinstance(value, list) or not all(isinstance(t, Mapping) for t in value):
        raise bad_request(f"'{param}' must be a list of tool objects", param=param)
    kinds = sorted({str(t.get("type")) for t in value} - {"function"})
    if kinds:
        raise bad_request(
            f"only function tools become REPL functions here, not {kinds}: the RLM calls its own "
            "sub-models and tools",
            param=param,
        )
    try:
        return tuple(client_tools(value).values())
    except ConfigError as exc:
        raise bad_request(str(exc), param=param) from None


TOOL_CHOICES = ("none", "auto", "required")


def check_tool_choice(value: Any, tools: tuple[ClientTool, ...]) -> None:
    """``tool_choice``: none, auto, required, or one of the tools by name (either API's shape)."""
    if value is None or value in TOOL_CHOICES:
        return
    named = None
    if isinstance(value, dict) and value.get("type") == "function":
        function = value.get("function")
        named = function.get("name") if isinstance(function, dict) else value.get("name")
    if named is None or named not in {tool.name for tool in tools}:
        raise bad_request(
            "'tool_choice' must be none, auto, required or a function tool given", "tool_choice"
        )


def start(
    session: Session, inputs: dict[str, Any], tools: tuple[ClientTool, ...], slots: RunSlots | None = None
) -> SessionRun:
    """A new run of ``session`` with the client's ``tools`` as REPL functions (409 when a run of
    the session is still on: it waits on a tool call the request does not answer, say)."""
    return session.start(tools=tools, slots=slots, **inputs)


def resume(session: Session, results: ToolResults) -> SessionRun:
    """The run waiting on ``results``, given them: it goes on from the calls they answer."""
    run = waiting_run(session, results)
    for call_id, output in results.outputs.items():
        run.control.resume(call_id, output)
    return run


async def step(run: SessionRun) -> dspy.Prediction | PendingToolCall:
    """The run's answer or its next tool call, for a request that waits for it. A request that
    goes away meanwhile stops the run between turns: nobody would read it."""
    try:
        return await run.next()
    except BaseException:
        if not run.done:
            run.cancel()
        raise


def waiting_run(session: Session, results: ToolResults) -> SessionRun:
    """The session's run that waits on every call ``results`` answers (404 when none does)."""
    run = session.run
    waiting = {call.call_id for call in run.pending} if run is not None and not run.done else set()
    missing = [call_id for call_id in results.outputs if call_id not in waiting]
    if missing:
        raise APIError(
            404,
            f"no run waits for tool call {missing[0]!r} (answered already, timed out, or never made)",
            code="tool_call_not_found",
            param="tool_call_id",
        )
    assert run is not None
    return run


def function_call_item(call: PendingToolCall) -> dict[str, Any]:
    """The Responses API's ``function_call`` output item of ``call``."""
    item = ResponseFunctionToolCall(
        type="function_call",
        id=f"fc_{call.call_id.removeprefix('call_')}",
        call_id=call.call_id,
        name=call.name,
        arguments=call.arguments_json,
        status="completed",
    )
    return item.model_dump(mode="json", exclude_none=True)


def chat_tool_call(call: PendingToolCall) -> dict[str, Any]:
    """A chat message's ``tool_calls`` entry of ``call``."""
    entry = ChatCompletionMessageFunctionToolCall.model_validate(
        {
            "id": call.call_id,
            "type": "function",
            "function": {"name": call.name, "arguments": call.arguments_json},
        }
    )
    return entry.model_dump(mode="json")


__all__ = ["chat_tool_call", "function_call_item", "parse_tools", "resume", "start", "step", "waiting_run"]

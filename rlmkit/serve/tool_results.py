"""The client's results of a paused run's tool calls, as a request carries them: the
``function_call_output`` items of a Responses ``input``, the ``tool`` messages of a chat request.

Only the results after the conversation's last message (its last tool calls) count: a client
that sends its whole conversation again (as agent runtimes do) repeats earlier results, answered long
ago, and a conversation that has moved on to a new question is a new call. A call's id names the session
whose run made it (``rlmkit.Session.of_call``), so the results alone say where the run waits.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rlmkit.serve.errors import bad_request
from rlmkit.session import Session

# an entry as read: (call id, output), () for one that neither answers nor closes, None to close
Read = tuple[Any, Any] | tuple[()] | None


@dataclass(frozen=True)
class ToolResults:
    """The client's outputs by call id (in the request's order), and the session waiting on them."""

    outputs: dict[str, str]
    session_id: str | None


def tool_results(body: Mapping[str, Any]) -> ToolResults | None:
    """The results a decoded body gives: its Responses ``input`` or its chat ``messages``."""
    items, messages = body.get("input"), body.get("messages")
    if isinstance(items, list):
        return _results(_trailing(items, _responses_result), "input")
    if isinstance(messages, list):
        return _results(_trailing(messages, _chat_result), "messages")
    return None


def _responses_result(item: Mapping[str, Any]) -> Read:
    """A ``function_call_output``'s (call id, output); None for an item that comes before the
    results that count (a message, the model's calls); ``()`` for one that is neither (reasoning)."""
    kind = item.get("type", "message")
    if kind == "function_call_output":
        return item.get("call_id"), item.get("output")
    return None if kind in ("message", "function_call") else ()


def _chat_result(message: Mapping[str, Any]) -> Read:
    role = message.get("role")
    if role == "tool":
        return message.get("tool_call_id"), message.get("content")
    return None


def _trailing(entries: list[Any], read: Callable[[Mapping[str, Any]], Read]) -> list[tuple[Any, Any]]:
    found: list[tuple[Any, Any]] = []
    for entry in entries:
        result = read(entry) if isinstance(entry, Mapping) else None
        if result is None:
            found = []  # the conversation moved on after them
        elif len(result) == 2:
            found.append(result)
    return found


def output_text(value: Any) -> str:
    """A tool's output as the REPL gets it: a string, or the text of its content parts."""
    if isinstance(value, list):
        return "".join(str(part.get("text", "")) for part in value if isinstance(part, Mapping))
    return value if isinstance(value, str) else ("" if value is None else str(value))


def _results(pairs: list[tuple[Any, Any]], param: str) -> ToolResults | None:
    if not pairs:
        return None
    if not all(isinstance(call_id, str) and call_id for call_id, _ in pairs):
        raise bad_request("a tool result must name the call it answers (its call id)", param=param)
    sessions = {Session.of_call(call_id) for call_id, _ in pairs}
    if len(sessions) > 1:
        raise bad_request("the tool results answer calls of different runs", param=param)
    return ToolResults({call_id: output_text(output) for call_id, output in pairs}, sessions.pop())


__all__ = ["ToolResults", "output_text", "tool_results"]

"""A Responses API request (``POST /v1/responses``) read onto the same mapping as a chat
completion (``mapping.py``):

    input (a string, or message items)   -> messages, mapped as a chat request's
    instructions                         -> a system message before them (so: context)
    text.format (json_object, json_schema) -> as response_format (json_schema: the output fields)
    extra_body inputs / budget / session -> as in chat completions
    previous_response_id                 -> the session it continues (``session_choice.py``)
    tools (function tools)               -> REPL functions whose call pauses the run (``client_tools.py``)
    function_call_output items           -> the results that resume the paused run
    background                           -> the run goes on by itself (``background.py``)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from openai.types.responses.response_create_params import ResponseCreateParamsBase

from rlmkit.serve.errors import bad_request
from rlmkit.serve.openai.client_tools import check_tool_choice, parse_tools
from rlmkit.serve.openai.images import image_url
from rlmkit.serve.openai.mapping import EMPTY, ChatRequest, check_fields, parse_request
from rlmkit.serve.session_choice import read_ask
from rlmkit.serve.tool_results import ToolResults
from rlmkit.session import ClientTool

OPENAI_FIELDS = frozenset(ResponseCreateParamsBase.__annotations__) | {"stream"}
RLMKIT_FIELDS = frozenset({"inputs", "session", "budget"})
TEXT_PARTS = frozenset({"input_text", "output_text", "text"})
ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}


@dataclasses.dataclass
class ResponsesRequest:
    chat: ChatRequest  # the same fields a chat request maps onto the program's inputs (its session too)
    store: bool = True
    instructions: str | None = None
    metadata: dict[str, str] = dataclasses.field(default_factory=dict)
    prompt_cache_key: str | None = None  # the client's identifiers, said back as given
    safety_identifier: str | None = None
    tools: tuple[ClientTool, ...] = ()  # the client's function tools: REPL functions of the run
    tool_definitions: list[dict[str, Any]] = dataclasses.field(default_factory=list)  # said back
    background: bool = False

    @property
    def tool_results(self) -> ToolResults | None:
        """The client's results of a paused run's tool calls (those of one of this server's sessions)."""
        return self.chat.tool_results

    @property
    def starts_a_run(self) -> bool:
        """Whether the call runs as a started session run (it may pause, or go on by itself)."""
        return bool(self.tools) or self.background or self.tool_results is not None

    @property
    def previous_response_id(self) -> str | None:
        return self.chat.ask.previous_response_id


def parse(body: Any, headers: Mapping[str, str] = EMPTY) -> ResponsesRequest:
    """Check a decoded body field by field (400 naming the field that is wrong)."""
    check_fields(body, OPENAI_FIELDS | RLMKIT_FIELDS)
    tools = parse_tools(body.get("tools"))
    check_tool_choice(body.get("tool_choice"), tools)
    store, background = body.get("store", True), body.get("background") or False
    if not isinstance(store, bool):
        raise bad_request("'store' must be true or false", param="store")
    if not isinstance(background, bool):
        raise bad_request("'background' must be true or false", param="background")
    if background and not store:
        raise bad_request("a background response is stored: drop 'store: false'", param="store")
    if background and body.get("stream"):
        raise bad_request("a background response is polled, not streamed: drop 'stream'", param="stream")
    instructions, metadata = body.get("instructions"), body.get("metadata") or {}
    if instructions is not None and not isinstance(instructions, str):
        raise bad_request("'instructions' must be a string", param="instructions")
    if not isinstance(metadata, dict):
        raise bad_request("'metadata' must be an object of strings", param="metadata")
    messages = ([{"role": "system", "content": instructions}] if instructions else []) + _messages(
        body.get("input")
    )
    chat_body = {
        "model": body.get("model"),
        "messages": messages or [{"role": "user", "content": ""}],
        "stream": bool(body.get("stream")),
        **{name: body[name] for name in RLMKIT_FIELDS if name in body and name != "session"},
    }
    if (response_format := _format(body.get("text"))) is not None:
        chat_body["response_format"] = response_format
    chat = parse_request(chat_body)
    chat.ask, chat.tools = read_ask(body, headers), tools
    keys = {name: body.get(name) for name in ("prompt_cache_key", "safety_identifier")}
    for name, value in keys.items():
        if value is not None and not isinstance(value, str):
            raise bad_request(f"'{name}' must be a string", param=name)
    asked = ResponsesRequest(
        chat,
        store,
        instructions,
        metadata,
        keys["prompt_cache_key"],
        keys["safety_identifier"],
        tools,
        _said_back(body.get("tools") or []),
        background,
    )
    if not messages:
        if not chat.inputs and asked.tool_results is None:
            raise bad_request("'input' is required (or the program's inputs in 'inputs')", param="input")
        chat.messages = []
    return asked


def _said_back(definitions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The function tools as a response says them back: the schema's ``FunctionTool`` (every
    field it requires, ``description`` null where none was given). ``strict`` is true whatever
    was asked: the REPL checks every call's arguments against the schema, so no call that reaches
    the client breaks it."""
    return [
        {
            "type": "function",
            "name": tool["name"],
            "description": tool.get("description"),
            "parameters": tool.get("parameters"),
            "strict": True,
        }
        for tool in definitions
    ]


def _messages(value: Any) -> list[dict[str, Any]]:
    """``input`` as chat messages: a string is one user message; items are messages with text."""
    if value is None:
        return []
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if not isinstance(value, list):
        raise bad_request("'input' must be a string or a list of items", param="input")
    messages = []
    for i, item in enumerate(value):
        kind = item.get("type", "message") if isinstance(item, dict) else None
        if kind in ("reasoning", "compaction", "function_call", "function_call_output"):
            continue  # an earlier response's own items handed back (the REPL has them), the compacted
            # conversation (in the REPL already), tool results (read by tool_results)
        role = ROLES.get(item.get("role")) if kind == "message" else None
        if role is None:
            raise bad_request(
                f"input[{i}]: only message items (user, assistant, system) are supported", "input"
            )
        content = item.get("content")
        if isinstance(content, list):
            content = [_part(p, f"input[{i}]") for p in content]
        elif not isinstance(content, str):
            raise bad_request(f"input[{i}]: content must be a string or a list of text parts", param="input")
        messages.append({"role": role, "content": content})
    return messages


def _part(part: Any, where: str) -> dict[str, Any]:
    """A content part as chat's: text, or an image (``input_image``) as an ``image_url`` part."""
    kind = part.get("type") if isinstance(part, dict) else None
    if kind in TEXT_PARTS:
        return {"type": "text", "text": part.get("text")}
    if kind == "input_image":
        return {"type": "image_url", "image_url": {"url": image_url(part, where, "input")}}
    raise bad_request(f"{where}: content parts are text and input_image parts", param="input")


def _format(text: Any) -> dict[str, Any] | None:
    """``text.format`` as chat's ``response_format`` (the Responses API names the schema flat)."""
    if text is None:
        return None
    found = text.get("format") if isinstance(text, dict) else None
    if found is None:
        return None
    if not isinstance(found, dict):
        raise bad_request("text.format must be an object", param="text.format")
    if found.get("type") == "json_schema":
        return {"type": "json_schema", "json_schema": {"schema": found.get("schema")}}
    return {"type": found.get("type")}

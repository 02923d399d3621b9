"""The client's function tools, as a chat or Responses request sends them, read and checked:
each a name the REPL can call, a description, and a well-formed JSON schema for its arguments.

    chat:       {"type": "function", "function": {"name", "description", "parameters"}}
    Responses:  {"type": "function", "name", "description", "parameters"}

A malformed tool is a 400 naming it, before anything runs. The tools read here are the request's
``tools``; what a call of one does is the REPL's (a function the RLM's code calls).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

import jsonschema

from rlmkit.serve.errors import bad_request

TOOL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")  # a Python identifier: the REPL calls it by name
TOOL_CHOICES = ("none", "auto", "required")
Shape = Literal["chat", "responses"]


@dataclass(frozen=True)
class ClientTool:
    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    strict: bool = False


def parse_tools(value: Any, shape: Shape) -> tuple[ClientTool, ...]:
    """``tools`` of a request in ``shape``: function tools, each checked (400 naming the first
    that is wrong)."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise bad_request("'tools' must be a list of function tools", param="tools")
    tools = tuple(_tool(item, shape, f"tools[{i}]") for i, item in enumerate(value))
    names = [tool.name for tool in tools]
    if len(set(names)) != len(names):
        raise bad_request(f"tool names must be distinct, got {names}", param="tools")
    return tools


def _tool(item: Any, shape: Shape, where: str) -> ClientTool:
    if not isinstance(item, dict) or item.get("type") != "function":
        raise bad_request(f"{where}: only function tools are supported", param="tools")
    spec = item.get("function") if shape == "chat" else item
    if not isinstance(spec, dict):
        raise bad_request(f"{where}.function must be an object", param="tools")
    name, description = spec.get("name"), spec.get("description") or ""
    if not isinstance(name, str) or not TOOL_NAME.match(name):
        raise bad_request(f"{where}: the name must be a Python identifier of up to 64 characters", "tools")
    if not isinstance(description, str):
        raise bad_request(f"{where}: the description must be a string", param="tools")
    parameters = spec.get("parameters")
    if parameters is None:
        parameters = {"type": "object", "properties": {}}
    if not isinstance(parameters, dict):
        raise bad_request(f"{where}: 'parameters' must be a JSON schema (an object)", param="tools")
    try:
        jsonschema.Draft202012Validator.check_schema(parameters)
    except jsonschema.SchemaError as exc:
        raise bad_request(
            f"{where}: 'parameters' is not a valid JSON schema: {exc.message}", "tools"
        ) from exc
    return ClientTool(name, description, parameters, bool(spec.get("strict")))


def check_tool_choice(value: Any, tools: tuple[ClientTool, ...]) -> None:
    """``tool_choice``: none, auto, required, or one of the tools by name (either shape)."""
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

"""The caller's hold on a run in flight: the client's function tools, and the request to stop.

A client's function tools (OpenAI function definitions: a name, a description, a JSON Schema of
the parameters) become functions of the same name in the REPL. The tool runs on the client, not
here: when the model's code calls one, its arguments are checked against the schema
(``tool_schema.py``), the call is counted by the budget and handed to the caller as a
``PendingToolCall``, and the cell waits, the worker blocked inside it, until the caller gives the
client's result (``RunControl.resume``). The function then returns that result and the cell goes on,
in the same live REPL. A call that gets no result within ``result_timeout_s`` ends the run with
``ToolResultTimeout``, keeping every turn it finished.

``RunControl.request_stop`` asks the run to end between turns: the turn in flight finishes, a call
waiting for the client's result fails at once, and the next turn does not start (``RunCancelled``).

Everything here lives on the run's event loop: the caller calls ``resume`` and ``request_stop`` from
a coroutine of that loop.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rlmkit.errors import ConfigError, RunCancelled, UserError
from rlmkit.run.tool_schema import signature
from rlmkit.trajectory import Trajectory

DEFAULT_RESULT_TIMEOUT_S = 600.0  # a client (a person, an agent runtime) answering a tool call


@dataclass(frozen=True)
class ClientTool:
    """One of the client's function tools, as the REPL gets it."""

    name: str
    description: str
    schema: dict[str, Any]  # the JSON Schema of its parameters

    @classmethod
    def from_openai(cls, definition: Mapping[str, Any]) -> ClientTool:
        """A tool from an OpenAI function definition: the chat form (``{"type": "function",
        "function": {"name", "description", "parameters"}}``) or the Responses form (the same keys
        beside ``type``). ``ConfigError`` for anything else, or a schema that is not JSON Schema."""
        import jsonschema

        if not isinstance(definition, Mapping) or definition.get("type") != "function":
            raise ConfigError("a client tool is a function definition ({'type': 'function', ...})")
        body = definition.get("function", definition)
        name = body.get("name") if isinstance(body, Mapping) else None
        if not isinstance(name, str) or not name.isidentifier() or name.startswith("_"):
            raise ConfigError(f"a client tool's name must be a Python identifier, got {name!r}")
        schema = body.get("parameters") or {"type": "object", "properties": {}}
        if not isinstance(schema, Mapping):
            raise ConfigError(f"client tool {name!r}: parameters must be a JSON Schema object")
        try:
            jsonschema.Draft202012Validator.check_schema(dict(schema))
        except jsonschema.SchemaError as exc:
            problem = f"client tool {name!r}: parameters are not JSON Schema: {exc.message}"
            raise ConfigError(problem) from None
        return cls(name=name, description=str(body.get("description") or ""), schema=dict(schema))

    def doc(self) -> str:
        """The tool's line in the system prompt."""
        text = " ".join(self.description.split()) or "a tool."
        return (
            f"{signature(self.name, self.schema)}: {text} (the client's tool: the call waits for the "
            "client's result, a string; arguments checked against its schema)"
        )


def client_tools(definitions: Iterable[ClientTool | Mapping[str, Any]]) -> dict[str, ClientTool]:
    """The tools by name, from definitions or ``ClientTool`` objects (``ConfigError``: a name twice)."""
    tools: dict[str, ClientTool] = {}
    for definition in definitions:
        tool = definition if isinstance(definition, ClientTool) else ClientTool.from_openai(definition)
        if tool.name in tools:
            raise ConfigError(f"client tool {tool.name!r} is defined twice")
        tools[tool.name] = tool
    return tools


@dataclass(frozen=True)
class PendingToolCall:
    """A call of a client tool the run waits on: the caller runs the tool and gives back its result
    with ``resume(call_id, output)``."""

    call_id: str
    name: str
    arguments: dict[str, Any]

    @property
    def arguments_json(self) -> str:
        """The arguments as the OpenAI APIs carry them: a JSON object in a string."""
        return json.dumps(self.arguments)


@dataclass
class _Waiting:
    call: PendingToolCall
    result: asyncio.Future[Any] = field(repr=False)


class RunControl:
    """What the caller of one run holds while it goes: its client tools, the calls waiting for
    their results, and the request to stop between turns."""

    def __init__(
        self,
        tools: Iterable[ClientTool | Mapping[str, Any]] = (),
        *,
        result_timeout_s: float = DEFAULT_RESULT_TIMEOUT_S,
        call_prefix: str = "",
    ):
        if not result_timeout_s > 0:
            raise ConfigError(f"result_timeout_s must be > 0, got {result_timeout_s!r}")
        self.tools = client_tools(tools)
        self.result_timeout_s = result_timeout_s
        self.call_prefix = call_prefix  # a session's id: a call's id then says which session waits on it
        self.stop_requested = False
        self._waiting: dict[str, _Waiting] = {}
        self.paused = asyncio.Event()  # set while a call waits for the client's result
        self.trajectory: Trajectory | None = None  # the top-level run's, as it grows (set as it starts)

    def call_id(self, node_id: str) -> str:
        """The id of the call the trajectory records as sub-call ``node_id``."""
        return f"call_{self.call_prefix}{node_id}"

    @property
    def pending(self) -> list[PendingToolCall]:
        """The calls waiting for the client's result, oldest first."""
        return [waiting.call for waiting in self._waiting.values()]

    async def call(self, call: PendingToolCall, timeout: float) -> Any:
        """Run side: hand ``call`` to the caller and wait for its result (``TimeoutError`` past
        ``timeout``; ``RunCancelled`` when the run is stopped meanwhile)."""
        if self.stop_requested:
            raise RunCancelled("the run was cancelled")
        result: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[call.call_id] = _Waiting(call, result)
        self.paused.set()
        try:
            return await asyncio.wait_for(result, timeout)
        finally:
            self._forget(call.call_id)

    def resume(self, call_id: str, output: Any) -> None:
        """Caller side: the client's result of call ``call_id`` (``UserError`` when no call of that
        id waits: answered already, timed out, or never made)."""
        waiting = self._waiting.get(call_id)
        if waiting is None or waiting.result.done():
            known = ", ".join(self._waiting) or "none"
            raise UserError(f"no tool call {call_id!r} is waiting for its result (waiting: {known})")
        waiting.result.set_result(output)
        self._forget(call_id)  # answered: no longer pending, even before the cell takes the result

    def _forget(self, call_id: str) -> None:
        self._waiting.pop(call_id, None)
        if not self._waiting:
            self.paused.clear()

    def request_stop(self) -> None:
        """Stop the run between turns; a call waiting for its result fails now."""
        self.stop_requested = True
        for waiting in self._waiting.values():
            if not waiting.result.done():
                waiting.result.set_exception(RunCancelled("the run was cancelled"))

    def check_stop(self) -> None:
        """Between turns: ``RunCancelled`` once a stop was requested."""
        if self.stop_requested:
            raise RunCancelled("the run was cancelled between turns")


__all__ = [
    "DEFAULT_RESULT_TIMEOUT_S",
    "ClientTool",
    "PendingToolCall",
    "RunControl",
    "client_tools",
]

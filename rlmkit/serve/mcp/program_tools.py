"""``rlmkit mcp PROGRAM``: the program as MCP tools over stdio (the official ``mcp`` SDK).

The tool's arguments are the signature's input fields, typed as the signature types them, and
``<field>_path`` for each text input: a file or folder on this machine read as that field (a
folder: ``{path: text}`` of its files). So a coding agent hands the RLM a repository or a log
by path, however big, and its own context window only ever holds the question and the answer.

While it works, the RLM's turns (the same text ``rlmkit serve`` streams as reasoning) go to the
agent as MCP log messages of this call, so a long run is watched, not waited on blind.

Beside the one-call tool, three tools keep a REPL between calls, as ``rlmkit serve``'s
sessions do: ``<name>_open`` loads inputs once (a repository, by path) and returns a session id,
``<name>_ask`` runs a call in it (the variables earlier calls made are still there), and
``<name>_close`` ends it. An idle session ends after ``idle_timeout`` seconds.

stdout is the protocol: nothing else may be written there, so logs go to stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic_core import to_jsonable_python

from rlmkit import events as ev
from rlmkit.errors import MissingInputError, RLMKitError
from rlmkit.serve.chunks import reasoning_of
from rlmkit.serve.errors import APIError
from rlmkit.serve.program import Program
from rlmkit.serve.sessions import Sessions

CONTEXT_PARAM = "mcp_context"  # where the SDK hands the call its Context (not a tool argument)
TOOL_DESCRIPTION = (
    "A Recursive Language Model: it reads inputs of any length inside a Python REPL, writes code "
    "over them and calls sub-models, and answers. Give long text by path (the *_path arguments)."
)


def _input_params(program: Program, optional: bool) -> list[inspect.Parameter]:
    """The signature's input fields as keyword parameters, and ``<field>_path`` for each text
    field. A text field is optional (it may come by path); with ``optional`` every field is."""
    params, path_fields = [], []
    for name, field in program.inputs.items():
        is_text = field.annotation is str
        loose = is_text or optional
        params.append(
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=None if loose else inspect.Parameter.empty,
                annotation=(field.annotation | None) if loose else field.annotation,
            )
        )
        if is_text:
            path_fields.append(name)
    for name in path_fields:
        path = inspect.Parameter(
            f"{name}_path", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=str | None
        )
        params.append(path)
    return params


def _read_inputs(program: Program, arguments: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """The inputs the arguments give, a ``<field>_path`` read as its field (a missing optional
    field is left out)."""
    inputs = {}
    for name in program.inputs:
        path = arguments.get(f"{name}_path")
        value = Path(path).expanduser() if path else arguments.get(name)
        if value is None:
            if name in required:
                raise MissingInputError(f"give {name!r} as text or {name}_path as a file or folder")
            continue
        inputs[name] = value
    return inputs


async def _followed(program: Program, inputs: dict[str, Any], session: Any, mcp_context: Any) -> str:
    """The call's answer; its turns go to the agent as log messages while it works."""
    prediction = None
    async for item in program.stream(inputs, session):
        if not isinstance(item, ev.Event):
            prediction = item  # the last item is the Prediction; a failed run raises here
        elif mcp_context is not None and (text := reasoning_of(item)) is not None:
            await mcp_context.info(text, logger_name="rlmkit")
    outputs = {name: prediction.get(name) for name in program.outputs}
    if len(outputs) == 1 and isinstance(next(iter(outputs.values())), str):
        return next(iter(outputs.values()))
    return json.dumps(to_jsonable_python(outputs))


def _tool(name: str, params: list[inspect.Parameter], run: Any) -> Any:
    """An async function whose signature is the tool's arguments (MCP reads its schema from it);
    ``run(arguments, mcp_context)`` answers it. A failure the agent can act on (a bad path, a
    run out of budget, an unknown session) is the tool's error result, and the server goes on."""
    params = [*params, inspect.Parameter(CONTEXT_PARAM, inspect.Parameter.KEYWORD_ONLY, annotation=Context)]

    async def call(**arguments: Any) -> str:
        try:
            return await run(arguments, arguments.pop(CONTEXT_PARAM, None))
        except RLMKitError as exc:
            raise ToolError(f"{type(exc).__name__}: {exc}") from exc
        except APIError as exc:
            raise ToolError(exc.message) from exc

    call.__signature__ = inspect.Signature(params, return_annotation=str)  # type: ignore[attr-defined]
    call.__annotations__ = {p.name: p.annotation for p in params} | {"return": str}
    call.__name__ = name.replace("-", "_")
    return call


def tool_function(program: Program) -> Any:
    """The one-call tool: the program's inputs in, its answer out."""
    required = [n for n, f in program.inputs.items() if f.annotation is str]

    async def run(arguments: dict[str, Any], mcp_context: Any) -> str:
        return await _followed(program, _read_inputs(program, arguments, required), None, mcp_context)

    return _tool(program.name, _input_params(program, optional=False), run)


def session_tools(program: Program, sessions: Sessions) -> dict[str, tuple[Any, str]]:
    """``<name>_open``, ``_ask`` and ``_close``: calls over one live REPL, its variables kept
    between them. Name: (function, description)."""
    session_param = inspect.Parameter("session", inspect.Parameter.KEYWORD_ONLY, annotation=str)

    async def open_session(arguments: dict[str, Any], mcp_context: Any) -> str:
        session = await sessions.open(_read_inputs(program, arguments, []))
        return json.dumps({"session": session.id, "holds": sorted(session.inputs)})

    async def ask(arguments: dict[str, Any], mcp_context: Any) -> str:
        session = await sessions.get(arguments["session"])
        sessions.in_call.add(session.id)  # never ended as idle under its call
        try:
            return await _followed(program, _read_inputs(program, arguments, []), session, mcp_context)
        finally:
            sessions.in_call.discard(session.id)
            sessions.touch(session.id)

    async def close(arguments: dict[str, Any], mcp_context: Any) -> str:
        await sessions.delete(arguments["session"])
        return json.dumps({"session": arguments["session"], "closed": True})

    name = program.name
    return {
        f"{name}_open": (
            _tool(f"{name}_open", _input_params(program, optional=True), open_session),
            f"Open a session of {name}: the inputs given here (a long context, by path) are loaded "
            "once into a live REPL. Returns its id, for the _ask and _close tools.",
        ),
        f"{name}_ask": (
            _tool(f"{name}_ask", [session_param, *_input_params(program, optional=True)], ask),
            f"Ask a session of {name} (its id from _open): the inputs given here (a question) join "
            "those it holds, and the REPL keeps the variables its earlier calls made.",
        ),
        f"{name}_close": (
            _tool(f"{name}_close", [session_param], close),
            f"Close a session of {name}, ending its REPL.",
        ),
    }


def mcp_server(program: Program, *, idle_timeout: float | None = 900.0, max_sessions: int = 16) -> Any:
    sessions = Sessions(program.rlm, idle_timeout=idle_timeout, max_live=max_sessions)

    @contextlib.asynccontextmanager
    async def lifespan(_: Any):
        reaper = asyncio.create_task(sessions.reap_forever())
        try:
            yield {}
        finally:
            reaper.cancel()
            await sessions.close_all()

    server = MCPServer(name=f"rlmkit-{program.name}", log_level="WARNING", lifespan=lifespan)
    fields = ", ".join(program.inputs) + " -> " + ", ".join(program.outputs)
    server.add_tool(
        tool_function(program),
        name=program.name,
        description=f"{TOOL_DESCRIPTION} Signature: {fields}.",
        structured_output=False,
    )
    for name, (function, description) in session_tools(program, sessions).items():
        server.add_tool(function, name=name, description=description, structured_output=False)
    return server


def run_stdio(program: Program, **options: Any) -> None:
    """``options``: ``mcp_server``'s (``idle_timeout``, ``max_sessions``)."""
    mcp_server(program, **options).run("stdio")

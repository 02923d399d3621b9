"""The served program as MCP tools (the official ``mcp`` SDK's ``MCPServer`` tools).

The tool's arguments are the signature's input fields, typed as the signature types them, and
``<field>_path`` for each text input: a file or folder on this machine read as that field (a
folder: ``{path: text}`` of its files). So a coding agent hands the RLM a repository or a log
by path, however big, and its own context window only ever holds the question and the answer.

While it works, the RLM's turns (the same text ``rlmkit serve`` streams as reasoning) go to the
agent as MCP log messages of this call, so a long run is watched, not waited on blind. A client
that takes tasks (``tasks.py``) gets a task instead, and reads the turns in its status.

Beside the one-call tool, three tools keep a REPL between calls. The 2026-07-28 revision of MCP
has no protocol sessions, so the server mints a handle instead: ``<name>_open`` loads inputs once
(a repository, by path) into an ``rlmkit.Session`` and returns its handle, ``<name>_ask`` runs a
call in it (the variables earlier calls made are still there), and ``<name>_close`` ends it. The
handle is the session's id (122 random bits): it names the REPL on any transport, over any
number of connections. An idle session ends after ``idle_timeout`` seconds.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic_core import to_jsonable_python

from rlmkit import events as ev
from rlmkit.errors import MissingInputError, RLMKitError
from rlmkit.serve.errors import APIError
from rlmkit.serve.mcp.tasks import offered_task
from rlmkit.serve.program import Program
from rlmkit.serve.reasoning import reasoning_of
from rlmkit.serve.sessions import Sessions

CONTEXT_PARAM = "mcp_context"  # where the SDK hands the call its Context (not a tool argument)
HANDLE_PARAM = "handle"
TOOL_DESCRIPTION = (
    "A Recursive Language Model: it reads inputs of any length inside a Python REPL, writes code "
    "over them and calls sub-models, and answers. Give long text by path (the *_path arguments)."
)

Follow = Callable[[ev.Event], Awaitable[None]]  # told each event of the run as it happens
Work = Callable[[Follow | None], Awaitable[str]]  # a prepared run: its answer, followed or not
Prepare = Callable[[dict[str, Any]], Awaitable[Work]]  # arguments checked and read: the run to do


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


async def _answer(program: Program, inputs: dict[str, Any], session: Any, follow: Follow | None) -> str:
    """The call's answer; each event of its run goes to ``follow`` while it works."""
    prediction: Any = None
    async for item in program.stream(inputs, session):
        if not isinstance(item, ev.Event):
            prediction = item  # the last item is the Prediction; a failed run raises here
        elif follow is not None:
            await follow(item)
    outputs = {name: prediction.get(name) for name in program.outputs}
    if len(outputs) == 1 and isinstance(next(iter(outputs.values())), str):
        return str(next(iter(outputs.values())))
    return json.dumps(to_jsonable_python(outputs))


def _logged(mcp_context: Any) -> Follow | None:
    """The run's turns as log messages of the call that asked (a client that opted in to them)."""
    if mcp_context is None:
        return None

    async def follow(event: ev.Event) -> None:
        if (text := reasoning_of(event)) is not None:
            await mcp_context.info(text, logger_name="rlmkit")

    return follow


def tool_error(exc: Exception) -> str:
    """What the agent reads of a failure it can act on (a bad path, a run out of budget, an
    unknown handle)."""
    return exc.message if isinstance(exc, APIError) else f"{type(exc).__name__}: {exc}"


def _tool(name: str, params: list[inspect.Parameter], prepare: Prepare, *, as_task: bool) -> Any:
    """An async function whose signature is the tool's arguments (MCP reads its schema from it).
    ``prepare(arguments)`` checks and reads them, before any model request, and gives the run to
    do; with ``as_task`` a client that takes tasks gets the run as a task, others wait for it. A
    failure is the tool's error result, and the server goes on."""
    params = [*params, inspect.Parameter(CONTEXT_PARAM, inspect.Parameter.KEYWORD_ONLY, annotation=Context)]

    async def call(**arguments: Any) -> str:
        mcp_context = arguments.pop(CONTEXT_PARAM, None)
        try:
            work = await prepare(arguments)
            task = offered_task() if as_task else None
            if task is not None:  # the run goes on after this request; its task reports it
                task.take(work)
                return ""
            return await work(_logged(mcp_context))
        except (RLMKitError, APIError) as exc:
            raise ToolError(tool_error(exc)) from exc

    call.__signature__ = inspect.Signature(params, return_annotation=str)  # type: ignore[attr-defined]
    call.__annotations__ = {p.name: p.annotation for p in params} | {"return": str}
    call.__name__ = name.replace("-", "_")
    return call


class ProgramTool:
    """One tool of the server: its function (``MCPServer.add_tool``), what it says, its hints."""

    def __init__(self, function: Any, description: str, annotations: ToolAnnotations, as_task: bool):
        self.function, self.description, self.annotations = function, description, annotations
        self.as_task = as_task  # a long run: a client that takes tasks gets one


def program_tools(program: Program, sessions: Sessions) -> dict[str, ProgramTool]:
    """The one-call tool (the program's inputs in, its answer out) and ``<name>_open``, ``_ask``
    and ``_close``: calls over one live REPL, its variables kept between them. Name: tool."""
    name = program.name
    required = [n for n, f in program.inputs.items() if f.annotation is str]
    handle_param = inspect.Parameter(HANDLE_PARAM, inspect.Parameter.KEYWORD_ONLY, annotation=str)
    # Reads files and answers; its code runs in the sandbox and changes nothing here. A model is
    # called, so the world it reaches is open.
    answers = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=True)
    keeps = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=True)
    ends = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True)

    async def one_call(arguments: dict[str, Any]) -> Work:
        inputs = _read_inputs(program, arguments, required)
        return lambda follow: _answer(program, inputs, None, follow)

    async def open_session(arguments: dict[str, Any]) -> Work:
        session = await sessions.open(_read_inputs(program, arguments, []))
        opened = json.dumps({HANDLE_PARAM: session.id, "holds": sorted(session.inputs)})

        async def done(follow: Follow | None) -> str:
            return opened

        return done

    async def ask(arguments: dict[str, Any]) -> Work:
        session = await sessions.get(arguments[HANDLE_PARAM])
        if session.id in sessions.in_call:
            raise ToolError(f"handle {session.id!r} is running a call: wait for it (or cancel its task)")
        inputs = _read_inputs(program, arguments, [])
        sessions.in_call.add(session.id)  # never ended as idle under its call, a task's included

        async def call(follow: Follow | None) -> str:
            try:
                return await _answer(program, inputs, session, follow)
            finally:
                sessions.in_call.discard(session.id)
                sessions.touch(session.id)

        return call

    async def close(arguments: dict[str, Any]) -> Work:
        await sessions.delete(arguments[HANDLE_PARAM])
        closed = json.dumps({HANDLE_PARAM: arguments[HANDLE_PARAM], "closed": True})

        async def done(follow: Follow | None) -> str:
            return closed

        return done

    fields = ", ".join(program.inputs) + " -> " + ", ".join(program.outputs)
    loose = _input_params(program, optional=True)
    return {
        name: ProgramTool(
            _tool(name, _input_params(program, optional=False), one_call, as_task=True),
            f"{TOOL_DESCRIPTION} Signature: {fields}.",
            answers,
            as_task=True,
        ),
        f"{name}_open": ProgramTool(
            _tool(f"{name}_open", loose, open_session, as_task=False),
            f"Open a live REPL of {name}: the inputs given here (a long context, by path) are loaded "
            "once. Returns its handle, for the _ask and _close tools.",
            keeps,
            as_task=False,
        ),
        f"{name}_ask": ProgramTool(
            _tool(f"{name}_ask", [handle_param, *loose], ask, as_task=True),
            f"Ask the live REPL of {name} a handle names (from _open): the inputs given here (a "
            "question) join those it holds, and the REPL keeps the variables its earlier calls made.",
            keeps,
            as_task=True,
        ),
        f"{name}_close": ProgramTool(
            _tool(f"{name}_close", [handle_param], close, as_task=False),
            f"Close the live REPL of {name} a handle names, ending it.",
            ends,
            as_task=False,
        ),
    }

"""``rlmkit mcp PROGRAM``: the program as one MCP tool over stdio (the official ``mcp`` SDK).

The tool's arguments are the signature's input fields, typed as the signature types them, and
``<field>_path`` for each text input: a file or folder on this machine read as that field (a
folder: ``{path: text}`` of its files). So a coding agent hands the RLM a repository or a log
by path, however big, and its own context window only ever holds the question and the answer.

While it works, the RLM's turns (the same text ``rlmkit serve`` streams as reasoning) go to the
agent as MCP log messages of this call, so a long run is watched, not waited on blind.

stdout is the protocol: nothing else may be written there, so logs go to stderr.
"""

from __future__ import annotations

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
from rlmkit.serve.program import Program

CONTEXT_PARAM = "mcp_context"  # where the SDK hands the call its Context (not a tool argument)
TOOL_DESCRIPTION = (
    "A Recursive Language Model: it reads inputs of any length inside a Python REPL, writes code "
    "over them and calls sub-models, and answers. Give long text by path (the *_path arguments)."
)


def tool_function(program: Program) -> Any:
    """An async function whose signature is the tool's arguments (MCP reads its schema from it)."""
    params, path_fields = [], []
    for name, field in program.inputs.items():
        annotation = field.annotation
        is_text = annotation is str
        default = None if is_text else inspect.Parameter.empty
        params.append(
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=default,
                annotation=(str | None) if is_text else annotation,
            )
        )
        if is_text:
            path_fields.append(name)
    for name in path_fields:
        path = inspect.Parameter(
            f"{name}_path", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=str | None
        )
        params.append(path)
    params.append(inspect.Parameter(CONTEXT_PARAM, inspect.Parameter.KEYWORD_ONLY, annotation=Context))
    required = [n for n, f in program.inputs.items() if f.annotation is str]

    async def call(**arguments: Any) -> str:
        try:
            return await answer(arguments, arguments.pop(CONTEXT_PARAM, None))
        except RLMKitError as exc:  # the agent reads why (a bad path, a run out of budget) and goes on
            raise ToolError(f"{type(exc).__name__}: {exc}") from exc

    async def answer(arguments: dict[str, Any], mcp_context: Any) -> str:
        inputs = {}
        for name in program.inputs:
            path = arguments.get(f"{name}_path")
            value = Path(path).expanduser() if path else arguments.get(name)
            if value is None and name in required:
                raise MissingInputError(f"give {name!r} as text or {name}_path as a file or folder")
            inputs[name] = value
        prediction = None
        async for item in program.stream(inputs):
            if not isinstance(item, ev.Event):
                prediction = item  # the last item is the Prediction; a failed run raises here
            elif mcp_context is not None and (text := reasoning_of(item)) is not None:
                await mcp_context.info(text, logger_name="rlmkit")
        outputs = {name: prediction.get(name) for name in program.outputs}
        if len(outputs) == 1 and isinstance(next(iter(outputs.values())), str):
            return next(iter(outputs.values()))
        return json.dumps(to_jsonable_python(outputs))

    call.__signature__ = inspect.Signature(params, return_annotation=str)  # type: ignore[attr-defined]
    call.__annotations__ = {p.name: p.annotation for p in params} | {"return": str}
    call.__name__ = program.name.replace("-", "_")
    return call


def mcp_server(program: Program) -> Any:
    server = MCPServer(name=f"rlmkit-{program.name}", log_level="WARNING")
    fields = ", ".join(program.inputs) + " -> " + ", ".join(program.outputs)
    server.add_tool(
        tool_function(program),
        name=program.name,
        description=f"{TOOL_DESCRIPTION} Signature: {fields}.",
        structured_output=False,
    )
    return server


def run_stdio(program: Program) -> None:
    mcp_server(program).run("stdio")

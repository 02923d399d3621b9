"""``rlmkit mcp PROGRAM``: the program as MCP tools over stdio, for coding agents.

Register it with an agent as a stdio server, e.g. ``{"command": "rlmkit", "args": ["mcp",
"context, question -> answer"]}``; the agent then calls the tool with a question and a path.
"""

from __future__ import annotations

from typing import Annotated

import typer

from rlmkit.cli.common import exit_on_error
from rlmkit.cli.serve import PROGRAM_HELP, load


def mcp(
    program: Annotated[str, typer.Argument(help=PROGRAM_HELP)],
    lm: Annotated[str | None, typer.Option(help="litellm model string; default: the embedded model.")] = None,
    api_base: Annotated[str | None, typer.Option(help="OpenAI-compatible server URL of --lm.")] = None,
    name: Annotated[str, typer.Option(help="The tool's name.")] = "rlm",
    signature: Annotated[
        str | None, typer.Option(help="A saved program's signature (default: context, question -> answer).")
    ] = None,
    session_idle_timeout: Annotated[float, typer.Option(help="Seconds before an idle session ends.")] = 900.0,
    max_sessions: Annotated[int, typer.Option(help="Sessions open at once, at most.")] = 16,
) -> None:
    """Serve PROGRAM as MCP tools over stdio.

    The tool takes the signature's inputs, each text input as text or as a file or folder path;
    NAME_open, NAME_ask and NAME_close keep one REPL between calls.
    """
    with exit_on_error():
        from rlmkit.serve import run_stdio  # a missing extra: one line naming its install

        served = load(program, lm, api_base, signature, name)
    run_stdio(served, idle_timeout=session_idle_timeout, max_sessions=max_sessions)


def register(app: typer.Typer) -> None:
    app.command("mcp")(mcp)

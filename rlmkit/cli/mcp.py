"""``rlmkit mcp PROGRAM``: the program as an MCP tool over stdio, for coding agents.

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
) -> None:
    """Serve PROGRAM as an MCP tool over stdio.

    The tool takes the signature's inputs, each text input as text or as a file or folder path.
    """
    with exit_on_error():
        from rlmkit.serve import run_stdio  # a missing extra: one line naming its install

        served = load(program, lm, api_base, signature, name)
    run_stdio(served)


def register(app: typer.Typer) -> None:
    app.command("mcp")(mcp)

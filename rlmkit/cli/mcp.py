"""``rlmkit mcp PROGRAM``: the program as MCP tools for coding agents, over stdio or HTTP.

Register it with an agent as a stdio server, e.g. ``{"command": "rlmkit", "args": ["mcp",
"context, question -> answer"]}``; the agent then calls the tool with a question and a path.
With ``--http`` it serves Streamable HTTP at ``http://HOST:PORT/mcp`` instead.
"""

from __future__ import annotations

from typing import Annotated

import typer

from rlmkit.cli.common import console, exit_on_error
from rlmkit.cli.serve import API_KEY_ENV, PROGRAM_HELP, load
from rlmkit.errors import ConfigError

LOOPBACK = "127.0.0.1"


def mcp(
    program: Annotated[str, typer.Argument(help=PROGRAM_HELP)],
    lm: Annotated[str | None, typer.Option(help="litellm model string; default: the embedded model.")] = None,
    api_base: Annotated[str | None, typer.Option(help="OpenAI-compatible server URL of --lm.")] = None,
    name: Annotated[str, typer.Option(help="The tool's name.")] = "rlm",
    signature: Annotated[
        str | None, typer.Option(help="A saved program's signature (default: context, question -> answer).")
    ] = None,
    session_idle_timeout: Annotated[float, typer.Option(help="Seconds before an idle REPL ends.")] = 900.0,
    max_sessions: Annotated[int, typer.Option(help="Live REPLs (handles) at once, at most.")] = 16,
    max_tasks: Annotated[int, typer.Option(help="Tasks running at once, at most.")] = 16,
    http: Annotated[bool, typer.Option("--http", help="Serve Streamable HTTP at /mcp, not stdio.")] = False,
    host: Annotated[
        str, typer.Option(help="With --http: address to bind; beyond loopback --api-key is required.")
    ] = LOOPBACK,
    port: Annotated[int, typer.Option(help="With --http: port to bind (0: a free one).")] = 8000,
    api_key: Annotated[
        str | None,
        typer.Option(
            envvar=API_KEY_ENV, help=f"With --http: bearer key clients must send (or ${API_KEY_ENV})."
        ),
    ] = None,
) -> None:
    """Serve PROGRAM as MCP tools, over stdio or HTTP (--http).

    MCP's 2026-07-28 revision (clients of earlier ones too). The tool takes the signature's
    inputs, each text input as text or as a file or folder path; NAME_open returns a handle to
    one live REPL, NAME_ask calls it and NAME_close ends it. A client that takes tasks gets a
    long call as a task: polled, and stopped between turns. --http serves Streamable HTTP at
    http://HOST:PORT/mcp.
    """
    from rlmkit.serve.server import check_exposure

    with exit_on_error():
        if not http and host != LOOPBACK:
            raise ConfigError("--host is for --http: stdio reaches only the agent that started the server")
        check_exposure(host, api_key)  # before a model is assembled or a program imported
        from rlmkit.serve import run_http, run_stdio  # a missing extra: one line naming its install

        served = load(program, lm, api_base, signature, name)
    options = {"idle_timeout": session_idle_timeout, "max_sessions": max_sessions, "max_tasks": max_tasks}
    if not http:
        run_stdio(served, **options)
        return
    where = f"http://{host}:{port}/mcp" if port else f"http://{host}:<a free port>/mcp (uvicorn says which)"
    console.print(f"serving {name!r} over MCP at {where}" + ("  (API key required)" if api_key else ""))
    with exit_on_error():
        run_http(served, host=host, port=port, api_key=api_key, **options)


def register(app: typer.Typer) -> None:
    app.command("mcp")(mcp)

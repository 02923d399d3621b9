"""``rlmkit serve PROGRAM``: an RLM program behind the OpenAI chat completions API.

PROGRAM is a signature ("context, question -> answer"), a saved program (the program.json that
``rlmkit optimize`` writes, or its folder) or ``module:attr`` naming an ``rlmkit.RLM`` or a DSPy
module holding one. Any OpenAI client then calls it with ``base_url=http://HOST:PORT/v1``.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from rlmkit.cli.common import console, exit_on_error, lm_from_flag

API_KEY_ENV = "RLMKIT_SERVE_API_KEY"
PROGRAM_HELP = "A signature, a saved program (program.json or its folder) or module:attr."


def load(program: str, lm: str | None, api_base: str | None, signature: str | None, name: str):
    """The program PROGRAM names (shared with ``rlmkit mcp``). --lm builds the model of a
    signature or saved program; a module:attr program keeps its own unless --lm is given."""
    from rlmkit.serve.program import MODULE_ATTR, load_program

    if MODULE_ATTR.match(program):
        working_folder_importable()
    if MODULE_ATTR.match(program) and lm is not None:
        import rlmkit

        rlmkit.configure(lm_from_flag(lm, api_base))  # the model of every RLM built without one
    return load_program(program, lm=lambda: lm_from_flag(lm, api_base), signature=signature, name=name)


def working_folder_importable() -> None:
    """``module:attr`` finds a module in the folder the command runs from, as uvicorn and flask
    find theirs: an installed ``rlmkit`` script's import path starts at its own folder, not here."""
    folder = os.getcwd()
    if folder not in sys.path and "" not in sys.path:
        sys.path.insert(0, folder)


def serve(
    program: Annotated[str, typer.Argument(help=PROGRAM_HELP)],
    lm: Annotated[str | None, typer.Option(help="litellm model string; default: the embedded model.")] = None,
    api_base: Annotated[str | None, typer.Option(help="OpenAI-compatible server URL of --lm.")] = None,
    host: Annotated[str, typer.Option(help="Address to bind; beyond loopback --api-key is required.")] = (
        "127.0.0.1"
    ),
    port: Annotated[int, typer.Option(help="Port to bind.")] = 8000,
    api_key: Annotated[
        str | None, typer.Option(help=f"Bearer key clients must send (or ${API_KEY_ENV}).")
    ] = None,
    name: Annotated[str, typer.Option(help="The model name clients ask for.")] = "rlmkit",
    signature: Annotated[
        str | None, typer.Option(help="A saved program's signature (default: context, question -> answer).")
    ] = None,
    sessions_dir: Annotated[
        Path | None, typer.Option(help="Save sessions here; a restart with it brings them back.")
    ] = None,
    session_idle_timeout: Annotated[float, typer.Option(help="Seconds before an idle session ends.")] = 900.0,
    max_sessions: Annotated[int, typer.Option(help="Live sessions at most (one more: 429).")] = 64,
    max_running: Annotated[int, typer.Option(help="Calls running at once.")] = 16,
    max_waiting: Annotated[int, typer.Option(help="Calls waiting for a slot (one more: 429).")] = 64,
    background_runs: Annotated[int, typer.Option(help="Background responses running at once.")] = 4,
    background_queue: Annotated[
        int, typer.Option(help="Background responses waiting for a slot (one more: 429).")
    ] = 64,
    max_body_mb: Annotated[float, typer.Option(help="Largest request body, MiB (larger: 413).")] = 64.0,
    grace: Annotated[float, typer.Option(help="Seconds calls in flight get to finish on SIGTERM.")] = 30.0,
    replicas: Annotated[
        int, typer.Option(help="Replicas of the program on Ray Serve behind one address (cluster extra).")
    ] = 1,
    ray: Annotated[
        str | None,
        typer.Option(
            "--ray",
            metavar="ADDRESS",
            help="With --replicas: 'local' (default) starts Ray here; 'auto', host:port or ray://... joins.",
        ),
    ] = None,
) -> None:
    """Serve PROGRAM behind the OpenAI chat API (streaming, sessions).

    Any OpenAI client calls it at http://HOST:PORT/v1 as model --name; a streamed call shows
    the RLM's turns as reasoning_content, then the answer as content. The server listens at
    once and loads the program (the embedded model, say) meanwhile: /health/ready is 503 until
    it can take calls; a program that fails to load stops it. --replicas N serves N copies on
    Ray Serve behind the one address, a session's calls reaching the copy that holds its REPL.
    """
    from rlmkit.serve.server import check_exposure

    key = api_key or os.environ.get(API_KEY_ENV) or None
    with exit_on_error():
        check_exposure(host, key)  # before a model is assembled or a program imported
    options = {
        "api_key": key,
        "max_body_bytes": int(max_body_mb * 2**20),
        "max_running": max_running,
        "max_waiting": max_waiting,
        "sessions_dir": str(sessions_dir) if sessions_dir else None,
        "session_idle_timeout": session_idle_timeout,
        "max_sessions": max_sessions,
        "background_runs": background_runs,
        "background_queue": background_queue,
    }
    if replicas > 1 or ray is not None:
        from rlmkit.cli.serve_replicas import LOCAL, serve_replicas

        run_in_each = functools.partial(load, program, lm, api_base, signature, name)
        serve_replicas(
            run_in_each,
            name=name,
            replicas=replicas,
            ray_address=ray or LOCAL,
            host=host,
            port=port,
            options=options,
        )
        return
    with exit_on_error():
        from rlmkit.serve import app, serve_forever  # a missing extra: one line naming its install

        api = app(load=lambda: load(program, lm, api_base, signature, name), name=name, **options)
    console.print(
        f"serving {name!r} at http://{host}:{port}/v1"
        + ("  (API key required)" if key else "")
        + "; loading the program (GET /health/ready: 200 once it can take calls)"
    )
    with exit_on_error():
        serve_forever(api, host=host, port=port, api_key=key, grace=grace)


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)

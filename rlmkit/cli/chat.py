"""``rlmkit chat PATH...``: questions over files or folders in one session, from a terminal.

The files are loaded once into one live REPL (an ``rlmkit.Session``); each answer shows its
turns, time and cost. ``/vars`` lists the model's variables, ``/save DIR`` and ``/load DIR``
keep and bring back a session, ``/quit`` (or Ctrl-D) ends. Ctrl-C stops the current call,
not the session.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from rlmkit.cli.common import exit_on_error, lm_from_flag, take_back_ctrl_c
from rlmkit.errors import RLMKitError

console = Console(soft_wrap=True, highlight=False)  # answers print as they are
HELP = "Ask a question, or: /vars, /save DIR, /load DIR, /quit (Ctrl-C stops a call, Ctrl-D quits)"


def load_paths(paths: list[Path]) -> Any:
    """One file: its text. Several paths, or a folder: ``{path: text}`` of every file."""
    from rlmkit.session import load_input  # as the session will: the CLI stays off the run's room

    if len(paths) == 1:
        return load_input("context", paths[0])
    files: dict[str, str] = {}
    for path in paths:
        loaded = load_input("context", path)
        if isinstance(loaded, dict):
            files.update({str(path / name): text for name, text in loaded.items()})
        else:
            files[str(path)] = str(loaded)  # a file: its text
    return files


def chat(
    paths: Annotated[list[Path], typer.Argument(help="Files or folders to load as the context.")],
    lm: Annotated[str | None, typer.Option(help="litellm model string; default: the embedded model.")] = None,
    api_base: Annotated[str | None, typer.Option(help="OpenAI-compatible server URL.")] = None,
    sandbox: Annotated[str, typer.Option(help="REPL sandbox backend.")] = "process",
) -> None:
    """Ask questions about files in one long-lived session.

    The files in PATH... load once; the model's variables stay between questions.
    """
    import rlmkit

    with exit_on_error():
        context = load_paths(paths)
        rlm = rlmkit.RLM("context, question -> answer", lm=lm_from_flag(lm, api_base), sandbox=sandbox)
    take_back_ctrl_c()  # Ctrl-C stops a call, even when a parent started us ignoring it
    session = rlm.session(context=context)
    size = len(context) if isinstance(context, str) else sum(map(len, context.values()))
    console.print(f"[bold]rlmkit chat[/bold]: {size:,} characters loaded. {HELP}")
    try:
        while (session := step(session, rlm)) is not None:
            pass
    finally:
        console.print("bye")


def step(session: Any, rlm: Any) -> Any:
    """Read and handle one line; the session to go on with, or None to quit."""
    try:
        line = console.input("[bold cyan]> [/bold cyan]").strip()
    except EOFError:
        session.close()
        return None
    except KeyboardInterrupt:  # at the prompt: a fresh line, as in a shell
        console.print()
        return session
    if not line:
        return session
    command, _, argument = line.partition(" ")
    try:
        if command == "/quit":
            session.close()
            return None
        if command == "/vars":
            shown = session.variables or {"(none yet)": ""}
            for name, description in shown.items():
                console.print(f"  {escape(name)}: {escape(description)}")
            return session
        if command in ("/save", "/load") and not argument:
            console.print(f"[red]error:[/red] {command} needs a directory")
            return session
        if command == "/save":
            console.print(f"saved to {escape(str(session.save(argument.strip())))}")
            return session
        if command == "/load":
            from rlmkit.session import Session

            loaded = Session.load(argument.strip(), rlm)
            session.close()
            console.print(f"loaded {escape(argument.strip())}: {len(loaded.variables)} variables")
            return loaded
        if command.startswith("/"):
            console.print(f"[red]error:[/red] unknown command {escape(command)}. {HELP}")
            return session
        ask(session, line)
    except KeyboardInterrupt:
        console.print("[yellow]stopped[/yellow] (the session goes on)")
    except RLMKitError as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
    return session


def ask(session: Any, question: str) -> None:
    with console.status("thinking (Ctrl-C stops this call)"):
        pred = session(question=question)
    traj = pred.trajectory
    console.print(escape(str(pred.answer)))
    restored = traj.meta.session.get("restored")
    note = f", REPL rebuilt ({restored})" if restored else ""
    console.print(
        f"[dim]{traj.n_turns} turns, {traj.duration_s:.1f} s, ${traj.usage.cost:.4f}{note}[/dim]",
        highlight=False,
    )


def register(app: typer.Typer) -> None:
    app.command("chat")(chat)

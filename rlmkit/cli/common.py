"""What every verb shares: the one ``--lm`` parser, the one error exit, the model progress bar.

Verbs from other packages (``programs``, ``optimizers``) import these too, so a flag means
the same thing and an error looks the same whichever verb it comes from.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

from rlmkit.errors import RLMKitError

console = Console(stderr=True, soft_wrap=True)  # soft wrap: paths and URLs stay whole

# Help as click writes it, not rich's panels: at 80 columns rich cuts long option names and
# labels every flag ``<bool>``; click's plain layout keeps every name whole.
PLAIN_HELP = None

# The --lm values that mean "the embedded model" (help texts say 'local'; no flag means it too).
EMBEDDED_FLAGS = (None, "", "local")


@contextlib.contextmanager
def model_progress(description: str = "model") -> Iterator:
    """A rich progress bar fed by ensure_model's (bytes_done, bytes_total) callback.

    The bar only appears once bytes move, so an already verified model prints nothing.
    """
    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        task = None

        def update(done: int, total: int) -> None:
            nonlocal task
            if task is None:
                task = progress.add_task(description, total=total)
            progress.update(task, completed=done)

        yield update


def lm_from_flag(flag: str | None, api_base: str | None = None, **options: Any):
    """The LM a ``--lm`` flag names: 'local' (or no flag) is the embedded model, anything else a
    litellm model string, served at ``api_base`` when one is given. ``options`` go to ``rlmkit.LM``."""
    if flag in EMBEDDED_FLAGS:
        from rlmkit.local import local_lm

        with model_progress("assembling + verifying the embedded model") as progress:
            return local_lm(progress=progress, **options)
    from rlmkit.models.lm import LM

    return LM(flag, api_base=api_base, **options)


@contextlib.contextmanager
def exit_on_error(code: int = 2, errors: tuple[type[BaseException], ...] = (RLMKitError,)) -> Iterator[None]:
    """Print an expected error as one red line (no traceback: it may hold a key) and exit ``code``."""
    try:
        yield
    except errors as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(code) from exc


def take_back_ctrl_c() -> None:
    """Make Ctrl-C raise KeyboardInterrupt again, for a verb that promises it stops something.

    A process started in the background of a script, or by a parent that ignores SIGINT, starts
    with SIGINT ignored (and may start with it blocked); Python then installs no handler of its
    own, and Ctrl-C would do nothing at all."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def exit_on_sigterm() -> None:
    """Make SIGTERM raise SystemExit, so ``finally`` blocks and context managers run: a verb
    that runs other verbs as child processes stops them too, instead of leaving them running."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))

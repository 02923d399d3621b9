"""The ``rlmkit`` command line (typer + rich).

The runtime's own verbs (``lm``, ``local``, ``view``, ``chat``, ``serve``, ``mcp``) live here, one
module each exposing ``register(app)``. Every other verb is found through the ``rlmkit.commands`` entry-point
group: a package registers ``name = "package.module:register"`` in its pyproject, so the
runtime never imports the packages built on it (``programs`` adds eval and demo,
``optimizers`` adds optimize, compile, train, train-loop and self-train).
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

import click
import typer
from typer.core import TyperGroup

from rlmkit.cli.common import PLAIN_HELP
from rlmkit.errors import DISTRIBUTION

COMMAND_GROUP = "rlmkit.commands"
RUNTIME_VERBS = ("lm", "local", "view", "chat", "serve", "mcp")
# The order `rlmkit --help` lists the verbs in: the first thing to run first, then the path a
# user takes (evaluate, tune, compile, train). Names only: the runtime imports none of them.
HELP_ORDER = (
    "demo", "chat", "eval", "optimize", "compile", "train", "train-loop", "self-train",
    "serve", "mcp", "view",
)  # fmt: skip


class _VerbsInHelpOrder(TyperGroup):
    """Lists verbs in ``HELP_ORDER``, commands and command groups (``self-train``) alike: typer
    itself lists a group after every plain command."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(self.commands, key=_help_rank)


_app = typer.Typer(
    name="rlmkit",
    cls=_VerbsInHelpOrder,
    help="Recursive Language Models: run, evaluate, tune, compile and train.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,  # locals may hold API keys or huge contexts
    rich_markup_mode=PLAIN_HELP,
)
_registered = False


def _print_version(value: bool) -> None:
    if value:
        import rlmkit  # one reading of the version: rlmkit.__version__, from the installed metadata

        print(f"rlmkit {rlmkit.__version__} ({DISTRIBUTION})")
        raise typer.Exit()


@_app.callback()
def _root(
    show_version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Recursive Language Models: run, evaluate, tune, compile and train."""
    # A callback keeps `rlmkit` a command group even when a single verb is registered.


def get_app() -> typer.Typer:
    """The app with every verb registered (once).

    Verbs are registered on first use, not when this package is imported: a verb's module
    imports ``rlmkit.cli.common``, which imports this package first; registering here at
    import time would load that verb's module while it is still half-initialised.
    """
    global _registered
    if not _registered:
        _registered = True
        for verb in RUNTIME_VERBS:
            importlib.import_module(f"rlmkit.cli.{verb}").register(_app)
        # A verb whose package fails to import raises here: a broken install is never hidden.
        for entry in sorted(entry_points(group=COMMAND_GROUP), key=lambda entry: entry.name):
            entry.load()(_app)
    return _app


def _help_rank(name: str) -> tuple[int, str]:
    return (HELP_ORDER.index(name) if name in HELP_ORDER else len(HELP_ORDER), name)


def __getattr__(name: str) -> typer.Typer:
    if name == "app":  # `from rlmkit.cli import app`, as the tests and users' scripts do
        return get_app()
    raise AttributeError(f"module 'rlmkit.cli' has no attribute {name!r}")


def main() -> None:
    get_app()()

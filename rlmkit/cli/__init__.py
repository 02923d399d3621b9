"""The ``rlmkit`` command line (typer + rich).

The runtime's own verbs (``lm``, ``local``, ``view``) live here, one module each exposing
``register(app)``. Every other verb is found through the ``rlmkit.commands`` entry-point
group: a package registers ``name = "package.module:register"`` in its pyproject, so the
runtime never imports the packages built on it (``programs`` adds eval and demo,
``optimizers`` adds optimize, compile, train and train-loop).
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

import typer

COMMAND_GROUP = "rlmkit.commands"
RUNTIME_VERBS = ("lm", "local", "view")

app = typer.Typer(
    name="rlmkit",
    help="Recursive Language Models: run, evaluate, tune, compile and train.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,  # locals may hold API keys or huge contexts
)


@app.callback()
def _root() -> None:
    """Recursive Language Models: run, evaluate, tune, compile and train."""
    # A callback keeps `rlmkit` a command group even when a single verb is registered.


def _register_verbs() -> None:
    for verb in RUNTIME_VERBS:
        importlib.import_module(f"rlmkit.cli.{verb}").register(app)
    # A verb whose package fails to import raises here: a broken install is never hidden.
    for entry in sorted(entry_points(group=COMMAND_GROUP), key=lambda entry: entry.name):
        entry.load()(app)


_register_verbs()


def main() -> None:
    app()

"""The ``rlmkit`` command line (typer + rich).

Each verb lives in its own module ``rlmkit/cli/<verb>.py`` exposing ``register(app)``.
This is the one place that wires programs and optimizers into the runtime's face;
nothing imports the CLI.
"""

from __future__ import annotations

import importlib

import typer

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


# Verb modules, in the order they appear in --help.
VERBS = ("demo", "eval", "lm", "local", "optimize", "compile", "train", "train_loop", "view")


def _register_verbs() -> None:
    for verb in VERBS:
        name = f"rlmkit.cli.{verb}"
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # verb not built yet: skip it, never hide a broken import
                continue
            raise
        module.register(app)


_register_verbs()


def main() -> None:
    app()

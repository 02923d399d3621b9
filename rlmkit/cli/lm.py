"""``rlmkit lm check [MODEL]``: which LM is active, one short real call, latency, tokens, cost."""

from __future__ import annotations

import time
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from rlmkit.cli.common import PLAIN_HELP, exit_on_error, lm_from_flag

console = Console(soft_wrap=True)
lm_app = typer.Typer(
    help="Check which language model is active and that it answers.",
    no_args_is_help=True,
    rich_markup_mode=PLAIN_HELP,
)

PING = [{"role": "user", "content": "Reply with exactly one word: ready"}]


@lm_app.command()
def check(
    model: Annotated[
        str | None,
        typer.Argument(help="litellm model string, e.g. openai/gpt-4o-mini. Default: the embedded model."),
    ] = None,
    api_base: Annotated[
        str | None, typer.Option(help="OpenAI-compatible server URL (vLLM, SGLang, ...).")
    ] = None,
    max_tokens: Annotated[int, typer.Option(help="Tokens to generate for the check.")] = 8,
) -> None:
    """Make one short real call (never cached) and show the model, latency, tokens and cost."""
    with exit_on_error(code=1):
        started = time.perf_counter()
        lm = lm_from_flag(model, api_base, cache=False, max_tokens=max_tokens, temperature=0.0)
        startup_s = time.perf_counter() - started
        source = "argument" if model else "embedded local model (no MODEL given)"
        with console.status(f"calling {lm.model}"):
            reply = lm.complete(PING)

    described = lm.describe()
    table = Table(show_header=False, box=None, padding=(0, 2))
    table.add_row("model", escape(described["model"]))
    table.add_row("source", source)
    table.add_row("api_base", escape(str(described["api_base"] or "provider default")))
    if startup_s >= 0.05:
        table.add_row("startup", f"{startup_s:.1f} s (assemble/verify + start the server)")
    table.add_row("latency", f"{reply.duration_s * 1000:.0f} ms")
    table.add_row("tokens", f"{reply.usage.prompt_tokens} in, {reply.usage.completion_tokens} out")
    table.add_row("cost", f"${reply.usage.cost:.6f}")
    table.add_row("reply", escape(repr(reply.text.strip()[:80])))
    console.print("[green]ok[/green] the LM answers")
    console.print(table)


def register(app: typer.Typer) -> None:
    app.add_typer(lm_app, name="lm")

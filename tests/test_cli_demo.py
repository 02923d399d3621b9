"""``rlmkit demo`` prints the run live from its events, against a scripted model."""

from __future__ import annotations

import threading

from typer.testing import CliRunner

from rlmkit.cli import app
from tests.conftest import Script, root_turn

runner = CliRunner()


def test_demo_prints_each_cell_before_the_next_turn_is_answered(tmp_path):
    from rlmkit.testing import ScriptedServer

    outputs: list[str] = []
    printed_first_cell = threading.Event()

    def root(body):
        if root_turn(body) == 0:
            return "```repl\nprint('FIRST-CELL-OUTPUT', len(context))\n```"
        # the second turn is answered only once the first cell's output is on the screen
        printed_first_cell.wait(30)
        return "```repl\nSUBMIT(answer=str(context.count('Label: location')))\n```"

    with ScriptedServer(Script(root)) as server:
        import programs.cli.demo as demo

        original = demo.console.print

        def spy(*args, **kwargs):
            original(*args, **kwargs)
            outputs.append(" ".join(str(getattr(a, "renderable", a)) for a in args))
            if any("FIRST-CELL-OUTPUT" in text for text in outputs):
                printed_first_cell.set()

        demo.console.print = spy
        try:
            result = runner.invoke(
                app,
                [
                    "demo",
                    "--lm",
                    "openai/scripted",
                    "--api-base",
                    server.url,
                    "--length",
                    "3000",
                    "--out",
                    str(tmp_path),
                ],
            )
        finally:
            demo.console.print = original
    assert result.exit_code == 0, result.output
    assert printed_first_cell.is_set()
    assert "turn 1: asking the model" in result.output and "turn 2: asking the model" in result.output
    assert "FIRST-CELL-OUTPUT" in result.output and "score:" in result.output
    assert "seed 2000 (never used in tuning" in result.output  # the user can tell which task
    assert "program: the default prompt" in result.output  # and which program (a provider ships none)
    assert list(tmp_path.glob("run-*/*.jsonl"))

"""``rlmkit demo`` prints the run live from its events, against a scripted model."""

from __future__ import annotations

import threading

from typer.testing import CliRunner

from rlmkit.cli import app
from tests.helpers.script import Script, root_turn

runner = CliRunner()


def test_demo_prints_each_cell_before_the_next_turn_is_answered(tmp_path):
    from rlmkit.testing import ScriptedServer

    outputs: list[str] = []
    printed_first_cell = threading.Event()

    def root(body):
        if root_turn(body) == 0:
            # a line longer than the panel: it must wrap onto the next line, not be cut at the edge
            return f"```repl\nprint('FIRST-CELL-OUTPUT', len(context))  # {'long comment ' * 6}LINE-END\n```"
        # the second turn is answered only once the first cell's output is on the screen
        printed_first_cell.wait(30)
        return (
            "```repl\nimport re\nkey = re.search(r'for (\\S+) mentioned', question).group(1)\n"
            "found = re.findall('for ' + key + r' is: (\\d+)', context)\n"
            "print(llm_query('CHECK-THIS ' + found[0]))\nSUBMIT(answer=found[0])\n```"
        )

    with ScriptedServer(Script(root, sub=lambda prompt: "SUB-REPLY looks right")) as server:
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
    assert "FIRST-CELL-OUTPUT" in result.output
    assert "LINE-END" in result.output  # the long line wrapped inside its panel, not cropped
    assert "llm_query" in result.output and "CHECK-THIS" in result.output  # the sub-call, live
    assert "SUB-REPLY looks right" in result.output
    assert "score: 1.000" in result.output  # the regex found the gold needle; the answer line shows both
    assert (
        "the context is about 750 tokens; the model's window is not known" in result.output
    )  # a scripted model
    assert "seed 2000 (a dev seed: never trained on" in result.output  # the user can tell which task
    assert "program: the default prompt" in result.output  # and which program (a provider ships none)
    assert list(tmp_path.glob("run-*/*.jsonl"))


def test_the_plain_call_line_compares_the_context_with_the_models_window():
    from programs.cli.demo import _plain_call_line
    from programs.demo_task import DEMO_LENGTH
    from rlmkit.local import LOCAL_MODEL_NAME, LocalServerConfig
    from rlmkit.models.contract import ModelTraits

    class Model:  # the model contract's two parts the line reads: its name and its traits
        def __init__(self, model):
            self.model = model
            self.traits = ModelTraits()

    window = LocalServerConfig().ctx
    line = _plain_call_line(DEMO_LENGTH, Model(LOCAL_MODEL_NAME))
    assert f"{DEMO_LENGTH // 4 / window:.1f}x the model's {window:,}-token window" in line
    assert "cannot read it at once" in line
    # with a LoRA adapter applied it is still the embedded model, with the same window
    assert _plain_call_line(DEMO_LENGTH, Model(f"{LOCAL_MODEL_NAME}+shipped_adapter-8e7df815ad")) == line
    assert "it fits" in _plain_call_line(4 * window // 2, Model(LOCAL_MODEL_NAME))
    assert "128,000-token window" in _plain_call_line(DEMO_LENGTH, Model("openai/gpt-4o-mini"))
    assert "window is not known" in _plain_call_line(DEMO_LENGTH, Model("openai/scripted"))


def test_the_demo_task_is_the_same_for_a_seed_and_moves_the_needle_between_seeds():
    from programs.demo_task import demo_example
    from programs.tasks import score

    first, again, other = demo_example(2000, 20_000), demo_example(2000, 20_000), demo_example(2001, 20_000)
    assert first.context == again.context and first.gold == again.gold
    assert first.meta["depth"] != other.meta["depth"]
    assert first.gold[0] in first.context and score(first, first.gold[0]) == 1.0


def test_the_measured_line_says_which_model_was_measured(tmp_path, monkeypatch):
    import json

    from programs.cli import demo

    measured = {"summary": {"right": 16, "n": 20, "accuracy": 0.8}, "rows": [{"seed": 2000}, {"seed": 2019}]}
    monkeypatch.setattr(demo, "ACCURACY_FILE", tmp_path / "demo_accuracy.json")
    demo.ACCURACY_FILE.write_text(json.dumps({**measured, "adapter": "shipped_adapter.gguf"}))
    line = demo._measured_accuracy()
    assert "16 of 20 held-out seeds 2000-2019" in line and "LoRA adapter shipped_adapter.gguf" in line
    demo.ACCURACY_FILE.write_text(json.dumps(measured))
    assert "the base model alone" in demo._measured_accuracy()

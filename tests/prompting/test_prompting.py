"""The default system prompt teaches generic REPL moves, and its examples really run."""

from __future__ import annotations

import re
from collections import Counter

from rlmkit.prompting import REPL_MOVES, Display, system_prompt
from rlmkit.protocols import get_protocol
from rlmkit.signature import make_signature


def prompt(protocol: str = "submit") -> str:
    return system_prompt(
        protocol=get_protocol(protocol),
        signature=make_signature("context, question -> answer: str"),
        instructions="",
        function_docs=[],
        demos=[],
        display=Display(sub_model_chars=8_000),
    )


def test_the_worked_moves_run_on_any_text():
    moves = re.findall(r"^- .*?: `(.*?)`$", prompt().split("Moves to pick from", 1)[1], re.MULTILINE)
    # the last move finishes, with a value copied from the output: never a count a move stored
    assert (
        len(moves) == 5 and moves[-1] == 'found = "the answer, copied from the output"; SUBMIT(answer=found)'
    )
    namespace = {
        "re": re,
        "Counter": Counter,
        "context": "text one text two field: alpha\nbeta two\n\nfield: gamma\n" * 3000,
    }
    for move in moves[:-1]:
        exec(compile(move, "<move>", "exec"), namespace)  # noqa: S102 - our own prompt's code
    assert len(namespace["kept"]) == 3000  # lines carrying both texts
    assert namespace["tally"] == {"alpha": 3000, "gamma": 3000}
    assert "chunks of\nabout 4_000 characters" in prompt()  # half of what a sub-model reads well


def test_the_prompt_shows_a_call_with_a_value_and_no_task_answer_code():
    for protocol in ("submit", "final", "answer"):
        text = prompt(protocol)
        assert "=str" not in text  # never SUBMIT(answer=str): small models copy it literally
    assert "SUBMIT(answer=answer)" in prompt("submit")
    assert "Label:" not in REPL_MOVES and "endswith(" not in REPL_MOVES


def test_each_protocol_finishes_its_worked_moves_its_own_way():
    assert "FINAL_VAR(found)" in prompt("final")
    assert 'answer["content"] = found' in prompt("answer")

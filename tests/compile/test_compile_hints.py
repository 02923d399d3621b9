"""Hinted sampling: the gold in the question while sampling, never in a row or a measurement."""

from __future__ import annotations

import pytest

from optimizers.compile import compile_sft
from programs.hints import HintError, hinted
from programs.tasks import generate
from rlmkit.testing.synthetic_runs import make_run
from rlmkit.trajectory import CodeBlock

HINT = " (Hint for this run: the answer is 42.)"


def hinted_run(task: str, printed: str):
    run = make_run(task=task, n_turns=3, answer=42)
    run.meta.task["meta"] = {"hint": HINT}
    turns = list(run.turns)
    first = turns[0]
    messages = [
        m.model_copy(update={"content": m.content + HINT}) if m.role == "user" else m
        for m in first.new_messages
    ]
    turns[0] = first.model_copy(
        update={"new_messages": messages, "blocks": [CodeBlock(code="print(x)", stdout=printed)]}
    )
    return run.model_copy(update={"turns": turns})


def test_a_hint_follows_the_question_of_a_training_example_only():
    example = generate("needle", n=1, length=5_000, seed=3)[0]
    hint = hinted(example)
    assert (
        hint.inputs["question"].startswith(example.inputs["question"])
        and example.gold[0] in hint.meta["hint"]
    )
    assert hint.inputs["context"] is example.inputs["context"]
    with pytest.raises(HintError, match="only training seeds"):
        hinted(generate("needle", n=1, length=5_000, seed=1000)[0])


def test_a_hinted_run_trains_only_if_it_printed_the_gold_and_never_shows_the_hint():
    read, guessed = hinted_run("read", "record 17: value 42"), hinted_run("guessed", "nothing here")
    result = compile_sft([read, guessed])
    assert result.report.runs_dropped["hint_not_read"] == 1
    assert {row.task_id for row in result.rows} == {"records/read"}
    assert all(HINT not in message.content for row in result.rows for message in row.messages)
    assert any(
        "How many records in read?" in message.content for row in result.rows for message in row.messages
    )

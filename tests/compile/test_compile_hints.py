"""Hinted sampling: the gold in the question while sampling, never in a row or a measurement."""

from __future__ import annotations

import pytest

from optimizers.compile import compile_sft
from programs.hints import HintError, hinted
from programs.tasks import generate
from rlmkit.testing.synthetic_runs import make_run
from rlmkit.trajectory import CodeBlock, SubCall

HINT = " (Hint for this run: the answer is 42.)"


def hinted_run(task: str, printed: str, code: str = "print(x)", subcalls=(), submitted=None, last=None):
    """A hinted run of three turns: the first runs ``code`` and prints ``printed``; the last runs
    ``last`` (default: sums what sub-calls counted) and submits ``submitted`` (default: the gold)."""
    run = make_run(task=task, n_turns=3, answer=42)
    if submitted is not None:
        run.outputs = {"answer": submitted}
    if last is not None:
        run.turns[-1].blocks = [CodeBlock(code=last)]
    run.meta.task["meta"] = {"hint": HINT}
    turns = list(run.turns)
    first = turns[0]
    messages = [
        m.model_copy(update={"content": m.content + HINT}) if m.role == "user" else m
        for m in first.new_messages
    ]
    turns[0] = first.model_copy(
        update={
            "new_messages": messages,
            "blocks": [CodeBlock(code=code, stdout=printed, subcalls=list(subcalls))],
        }
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


def test_a_hinted_run_trains_only_if_its_code_brought_the_gold_out_and_never_shows_the_hint():
    read = hinted_run("read", "record 17: value 42")  # printed before the last turn
    pulled = hinted_run("pulled", "nothing here")  # the last turn's code computed what it submitted
    partly = hinted_run("partly", "nothing here", submitted=[42, 7])  # a list: part of it right
    partly.meta.task["gold"] = [42, 8]
    partly.score = 0.5
    guessed = hinted_run("guessed", "nothing here", last="SUBMIT(answer=42)")
    result = compile_sft([read, pulled, partly, guessed])
    assert dict(result.report.runs_dropped) == {"hint_not_read": 1, "hint_used": 1}
    assert {row.task_id for row in result.rows} == {"records/read", "records/pulled"}
    assert all(HINT not in message.content for row in result.rows for message in row.messages)
    assert any(
        "How many records in read?" in message.content for row in result.rows for message in row.messages
    )


def test_a_hinted_run_that_took_the_answer_from_the_hint_is_dropped():
    """Found by reading means the gold came out of the input: a block that asks a sub-model the
    hinted question, parses ``question``, or types the gold is a copy, whatever it printed."""
    asked = SubCall(kind="llm_query", name="llm_query", prompt="How many records?" + HINT, reply="42")
    copies = {
        "asked": hinted_run(
            "asked", "'42'", code="llm_query('How many records?" + HINT + "')", subcalls=[asked]
        ),
        "parsed": hinted_run("parsed", "['42']", code="print(re.findall(r'\\d+', question))"),
        "typed": hinted_run("typed", "found 42", code="print('found', 42)"),
        "namespace": hinted_run("namespace", "{'q': '... 42'}", code="print(locals())"),
    }
    read = hinted_run("read", "record 17: value 42", code="print(context[1420:1500])")
    result = compile_sft([*copies.values(), read])
    assert result.report.runs_dropped["hint_used"] == len(copies)
    assert {row.task_id for row in result.rows} == {"records/read"}  # 1420 is not the gold 42

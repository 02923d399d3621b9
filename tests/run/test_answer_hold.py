"""``hold_unread_answers``: an answer given in a turn whose code also printed output waits until
the model has read that output and answers the same again (rlmkit/run/guards.py, AnswerHold)."""

from __future__ import annotations

import rlmkit
from rlmkit.prompting import ANSWER_ACCEPTED, ANSWER_HELD
from rlmkit.run.guards import AnswerHold
from tests.helpers.replies import repl


def scripted(replies: list[str]):
    """An in-process model answering root turns from ``replies`` in order; the requests it saw."""
    seen: list[list[dict]] = []

    def reply(messages: list[dict]) -> str:
        seen.append(messages)
        return replies[min(len(seen) - 1, len(replies) - 1)]

    return rlmkit.FunctionLM(reply), seen


SEARCH_AND_ANSWER = repl(
    "hits = context.count('lantern')", "print('hits:', hits)", "SUBMIT(answer=str(hits))"
)


def test_an_answer_given_with_unread_output_waits_and_the_model_reads_the_output():
    lm, seen = scripted([SEARCH_AND_ANSWER, repl("SUBMIT(answer='two lanterns')")])
    pred = rlmkit.RLM("context -> answer", lm=lm, hold_unread_answers=True)(context="lantern, lantern")
    assert pred.answer == "two lanterns"  # the first answer ("2") was not taken
    told = seen[1][-1]["content"]
    assert "hits: 2" in told and ANSWER_HELD.format(shown="answer='2'") in told
    assert ANSWER_ACCEPTED not in told
    assert [turn.final for turn in pred.trajectory.turns] == [False, True]
    assert pred.trajectory.turns[0].held == {"answer": "2"}  # the trajectory keeps what was held


def test_the_same_answer_given_again_after_reading_is_taken():
    lm, seen = scripted([SEARCH_AND_ANSWER])  # the model repeats its cell: output read, same answer
    pred = rlmkit.RLM("context -> answer", lm=lm, hold_unread_answers=True)(context="lantern, lantern")
    assert pred.answer == "2" and len(seen) == 2


def test_an_answer_from_a_turn_that_printed_nothing_is_taken_at_once():
    lm, seen = scripted([repl("SUBMIT(answer=context[:7])")])
    pred = rlmkit.RLM("context -> answer", lm=lm, hold_unread_answers=True)(context="lantern, lantern")
    assert pred.answer == "lantern" and len(seen) == 1


def test_the_last_turn_answer_is_taken_whatever_it_printed():
    lm, seen = scripted(
        [SEARCH_AND_ANSWER, repl("print('again')", "SUBMIT(answer='changed')")]  # a new answer each time
    )
    rlm = rlmkit.RLM("context -> answer", lm=lm, hold_unread_answers=True, max_iterations=1)
    pred = rlm(context="lantern, lantern")
    assert pred.answer == "changed" and len(seen) == 2  # the answer-now turn is never held


def test_off_by_default_an_answer_with_output_ends_the_run():
    lm, seen = scripted([SEARCH_AND_ANSWER])
    pred = rlmkit.RLM("context -> answer", lm=lm)(context="lantern, lantern")
    assert pred.answer == "2" and len(seen) == 1


def test_a_final_answer_after_printing_code_is_held_the_same_way():
    first = repl("print(len(context))") + "\nFINAL(16)"
    lm, seen = scripted([first, "FINAL(sixteen)"])
    rlm = rlmkit.RLM("context -> answer", lm=lm, protocol="final", hold_unread_answers=True)
    pred = rlm(context="lantern, lantern")
    assert pred.answer == "sixteen" and "16" in seen[1][-1]["content"]


def test_a_held_answer_is_confirmed_only_by_the_same_values():
    hold = AnswerHold()
    assert hold.holds({"answer": "0"}, printed=True)
    assert hold.holds({"answer": "7"}, printed=True)  # a different answer, again unread output
    assert not hold.holds({"answer": "7"}, printed=True)
    assert not AnswerHold().holds({"answer": "0"}, printed=False)

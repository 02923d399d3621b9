"""The per-turn filter: a good run's bad turns are dropped one by one, each counted by reason."""

from __future__ import annotations

from optimizers.compile import Filters, compile_sft
from optimizers.compile.turn_filter import turn_problems
from rlmkit.prompting import ANSWER_REJECTED
from rlmkit.testing.synthetic_runs import make_run
from rlmkit.trajectory import CodeBlock


def with_turn(run, index, **changes):
    turns = list(run.turns)
    turns[index] = turns[index].model_copy(update=changes)
    return run.model_copy(update={"turns": turns})


def test_each_kind_of_bad_turn_is_named():
    run = make_run(task="a", n_turns=6)
    run = with_turn(run, 0, blocks=[CodeBlock(code="x = 1", error="NameError: name 'y' is not defined")])
    run = with_turn(run, 1, reply=run.turns[1].reply + "\n>>> print(x)\n1")
    run = with_turn(run, 2, blocks=[])
    run = with_turn(run, 3, feedback=ANSWER_REJECTED.format(error="answer: Input should be a valid integer"))
    assert turn_problems(run.turns) == {
        0: "code_failed",
        1: "made_up_repl_output",
        2: "not_one_code_block",
        3: "answer_rejected",
    }


def test_a_repeated_turn_drops_itself_and_every_turn_after_it():
    run = make_run(task="a", n_turns=5)
    run = with_turn(run, 1, reply="```repl\nprint(context[:500])\n```")
    run = with_turn(run, 2, reply="```repl\nprint(context[:500])\n```\n")
    assert turn_problems(run.turns) == {
        2: "repeated_turn",
        3: "after_repeated_turn",
        4: "after_repeated_turn",
    }


def test_compile_keeps_the_good_turns_of_a_good_run_and_counts_the_rest():
    good = make_run(task="a", n_turns=4)
    bad = with_turn(
        make_run(task="b", n_turns=4), 1, blocks=[CodeBlock(code="1/0", error="ZeroDivisionError")]
    )
    whole = compile_sft([good, bad])
    per_turn = compile_sft([good, bad], filters=Filters(per_turn=True))
    assert len(whole.rows) == 8
    assert len(per_turn.rows) == 7
    assert ("b", 1) not in {(row.task_id.split("/")[-1], row.turn) for row in per_turn.rows}
    assert per_turn.report.samples_dropped["turn:code_failed"] == 1

"""Guard rails of the runtime (rlmkit/run/guards.py, rlmkit/run/model_call.py): what keeps a small
model's run honest and bounded."""

from __future__ import annotations

import threading
import time

import pytest

import rlmkit
from rlmkit.budget import DEFAULT_MAX_CALLS
from rlmkit.errors import BudgetExceeded, MaxIterationsError
from rlmkit.protocols.base import BLOCK_END
from rlmkit.run.guards import NUDGE
from rlmkit.settings import SUBCALL_MAX_TOKENS, TURN_MAX_TOKENS
from rlmkit.testing import is_root_request
from tests.helpers.replies import repl
from tests.helpers.script import Script


def test_a_rebound_input_is_restored_and_the_model_is_told(serve):
    server, lm = serve(
        Script(
            [
                repl("context = 'south lantern orbit'", "print(len(context))"),
                repl("SUBMIT(answer=str(len(context)))"),
            ]
        )
    )
    pred = rlmkit.RLM("context -> answer", lm=lm)(context="x" * 5000)
    assert pred.answer == "5000"  # the second turn ran on the real input
    told = server.requests[1]["messages"][-1]["content"]
    assert "context is an input and was restored" in told
    assert "19" in told  # the cell's own output is still there


def test_submit_of_a_type_is_rejected_with_how_to_pass_the_variable(serve):
    server, lm = serve(Script([repl("n = 257", "SUBMIT(answer=str)"), repl("SUBMIT(answer=n)")]))
    pred = rlmkit.RLM("context -> answer: str", lm=lm)(context="abc")
    assert pred.answer == "257"
    told = server.requests[1]["messages"][-1]["content"]
    assert "is a type, not a value" in told and "SUBMIT(answer=answer)" in told
    system = server.requests[0]["messages"][0]["content"]
    assert "SUBMIT(answer=answer)" in system and "SUBMIT(answer=str)" not in system


def test_every_call_is_capped_and_root_turns_stop_at_invented_output(serve):
    server, lm = serve(Script([repl("x = llm_query('hi')", "SUBMIT(answer=x)")]))
    rlmkit.RLM("context -> answer", lm=lm)(context="abc")
    root, sub = server.requests
    assert root["max_tokens"] == TURN_MAX_TOKENS and "REPL output:" in root["stop"]
    assert sub["max_tokens"] == SUBCALL_MAX_TOKENS and "stop" not in sub
    server.requests.clear()
    rlmkit.RLM("context -> answer", lm=lm, max_tokens=300, sub_max_tokens=200)(context="abc")
    assert [r["max_tokens"] for r in server.requests] == [300, 200]


def test_a_tighter_cap_on_the_lm_itself_wins(serve):
    server, lm = serve(Script([repl("SUBMIT(answer='ok')")]), lm_kwargs={"max_tokens": 64})
    rlmkit.RLM("context -> answer", lm=lm)(context="abc")
    assert server.requests[0]["max_tokens"] == 64


def test_max_seconds_cancels_a_call_in_flight_and_keeps_the_partial_trajectory(serve):
    release = threading.Event()

    def responder(body: dict) -> str:
        if is_root_request(body) and any(m["role"] == "assistant" for m in body["messages"]):
            release.wait(30)  # the second turn hangs, like a 9,500-token completion
        return repl("print('first turn')")

    server, lm = serve(responder)
    rlm = rlmkit.RLM("context -> answer", lm=lm, budget=rlmkit.Budget(max_seconds=1.5))
    start = time.monotonic()
    try:
        with pytest.raises(BudgetExceeded) as info:
            rlm(context="abc")
    finally:
        release.set()
    assert time.monotonic() - start < 1.5 + 1.0
    assert info.value.kind == "seconds"
    traj = info.value.trajectory
    assert traj.status == "budget_exceeded" and traj.n_turns == 1
    assert traj.turns[0].blocks[0].stdout.strip() == "first turn"


def test_the_same_code_twice_gets_a_nudge_then_a_forced_answer(serve):
    server, lm = serve(Script([repl("answer = '451573'")]))
    rlm = rlmkit.RLM("context -> answer", lm=lm, max_iterations=10)
    with pytest.raises(MaxIterationsError) as info:
        rlm(context="abc")
    feedback = [turn.feedback or "" for turn in info.value.trajectory.turns]
    assert NUDGE not in feedback[0] and NUDGE in feedback[1]
    assert len(server.requests) == 4  # seen, nudged, repeated again, then one "answer now" turn
    assert "out of turns" in server.requests[-1]["messages"][-1]["content"]
    assert "repeating itself" in str(info.value)


def test_an_answer_stored_under_its_field_name_gets_the_one_call_that_finishes(serve):
    server, lm = serve(Script([repl("n = 3", "answer = n * 2"), repl("SUBMIT(answer=answer)")]))
    pred = rlmkit.RLM("context -> answer: int", lm=lm)(context="abc")
    assert pred.answer == 6
    told = server.requests[1]["messages"][-1]["content"]
    assert "`answer` is set (answer = 6)" in told and "```repl\nSUBMIT(answer=answer)\n```" in told


def test_no_finish_hint_when_the_field_was_not_assigned_this_turn(serve):
    server, lm = serve(Script([repl("answers = 5", "print(answers == 5)"), repl("SUBMIT(answer=answers)")]))
    rlmkit.RLM("context -> answer: int", lm=lm)(context="abc")
    assert "is set" not in server.requests[1]["messages"][-1]["content"]


def test_one_block_per_turn_stops_the_reply_at_its_first_block_and_runs_only_that(serve):
    invented = repl("x = 2", "print(x)") + "\n" + repl("2") + "\n" + repl("SUBMIT(answer='guess')")
    server, lm = serve(Script([invented, repl("SUBMIT(answer=str(x * 10))")]))
    pred = rlmkit.RLM("context -> answer", lm=lm, blocks_per_turn=1)(context="abc")
    assert pred.answer == "20"  # the invented output and the blind SUBMIT never ran
    assert [b.code for b in pred.trajectory.turns[0].blocks] == ["x = 2\nprint(x)"]
    assert BLOCK_END in server.requests[0]["stop"] and "REPL output:" in server.requests[0]["stop"]
    server.requests.clear()
    rlmkit.RLM("context -> answer", lm=lm, max_tokens=100)(context="abcd")  # default: every block runs
    assert BLOCK_END not in server.requests[0]["stop"]


def test_the_default_budget_stops_a_runaway_batch_at_the_cap(serve):
    server, lm = serve(
        Script(
            [repl("r = llm_query_batched(['hi'] * 5000)", "SUBMIT(answer=str(len(r)))")],
            sub=lambda prompt: "hello",
        )
    )
    with pytest.raises(BudgetExceeded) as info:  # no per-call sub-call cap: the budget stops it
        rlmkit.RLM("context -> answer", lm=lm, max_llm_calls=None)(context="abc")
    assert info.value.kind == "calls" and info.value.limit == DEFAULT_MAX_CALLS
    assert "max_calls" in str(info.value)  # says how to raise it
    assert len(server.requests) <= DEFAULT_MAX_CALLS
    server.requests.clear()
    # the default per-call cap (dspy.RLM's 50): the rest of the batch are errors the code sees
    pred = rlmkit.RLM("context -> answer", lm=lm)(context="abc")
    assert pred.answer == "5000" and len(server.requests) == 1 + 50  # one root turn, 50 sub-calls


def test_an_explicit_budget_without_a_call_cap_has_none(serve):
    _, lm = serve(Script([repl("SUBMIT(answer='x')")]))
    assert rlmkit.RLM("context -> answer", lm=lm).budget.max_calls == DEFAULT_MAX_CALLS
    assert rlmkit.RLM("context -> answer", lm=lm, budget=rlmkit.Budget()).budget.max_calls is None

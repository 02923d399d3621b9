"""``RLM.stream()`` and ``dspy.streamify(rlm)`` against a scripted model."""

from __future__ import annotations

import asyncio
import threading
import time

import dspy
import pytest
from dspy.streaming.messages import StatusMessage

import rlmkit
from rlmkit import events as ev
from rlmkit.errors import MaxIterationsError, MissingInputError
from tests.helpers.replies import repl
from tests.helpers.script import Script, root_turn


async def collect(aiter) -> list:
    return [item async for item in aiter]


def test_stream_yields_events_while_the_run_goes_on_then_the_prediction(serve):
    first_cell_seen = threading.Event()

    def root(body):
        if root_turn(body) == 0:
            return repl("x = llm_query('hi')", "print(x)")
        first_cell_seen.wait(30)  # the 2nd turn is only answered once the consumer saw turn 1's cell
        return repl("SUBMIT(answer='done')")

    server, lm = serve(Script(root))
    rlm = rlmkit.RLM("context -> answer", lm=lm)

    async def consume():
        items = []
        async for item in rlm.stream(context="abc"):
            items.append(item)
            if isinstance(item, ev.CellFinished):
                first_cell_seen.set()
        return items

    items = asyncio.run(consume())
    assert first_cell_seen.is_set()
    assert isinstance(items[0], ev.RunStarted) and isinstance(items[-1], dspy.Prediction)
    assert items[-1].answer == "done" and isinstance(items[-2], ev.RunFinished)
    names = [type(i).__name__ for i in items[:-1]]
    assert (
        names.count("TurnStarted") == 2
        and names.count("ModelReply") == 3
        and names.count("SubcallFinished") == 1
    )
    reply = next(i for i in items if isinstance(i, ev.ModelReply) and i.start.root)
    assert "llm_query('hi')" in reply.completion.text


def test_stream_of_a_failed_run_ends_with_its_error_and_trajectory(serve):
    server, lm = serve(Script([repl("print(1)")]))
    rlm = rlmkit.RLM("context -> answer", lm=lm, max_iterations=1)
    items = []

    async def consume():
        async for item in rlm.stream(context="abc"):
            items.append(item)

    with pytest.raises(MaxIterationsError) as info:
        asyncio.run(consume())
    assert isinstance(items[-1], ev.RunFinished) and items[-1].error is info.value
    assert items[-1].trajectory is info.value.trajectory and info.value.trajectory.n_turns == 2


def test_stream_rejects_bad_input_before_any_model_call(serve):
    server, lm = serve(Script([repl("SUBMIT(answer='x')")]))
    with pytest.raises(MissingInputError):
        asyncio.run(collect(rlmkit.RLM("context, question -> answer", lm=lm).stream(context="abc")))
    assert server.requests == []


@pytest.mark.parametrize("is_async", [False, True])
def test_streamify_shows_status_messages_for_turns_and_cells(serve, is_async):
    def root(body):
        user = body["messages"][1]["content"]
        if "child task" in user:
            return repl("SUBMIT(answer='leaf')")
        return [repl("print(len(context))"), repl("SUBMIT(answer=rlm_query('child task', 'c'))")][
            min(root_turn(body), 1)
        ]

    server, lm = serve(Script(root))
    rlm = rlmkit.RLM("context -> answer", lm=lm, max_depth=2)
    program = dspy.streamify(rlm, is_async_program=is_async)
    items = asyncio.run(collect(program(context="abcdef")))
    assert isinstance(items[-1], dspy.Prediction) and items[-1].answer == "leaf"
    messages = [i.message for i in items if isinstance(i, StatusMessage)]
    assert messages[0] == "Turn 1: asking the root model..."
    assert "Running code: print(len(context))" in messages and "Code finished" in messages[2]
    assert "Starting a child RLM run at depth 1..." in messages
    assert "Turn 1 (child run, depth 1): asking the root model..." in messages
    assert messages.index("Turn 2: asking the root model...") < messages.index(
        "Starting a child RLM run at depth 1..."
    )


@pytest.mark.parametrize("is_async", [False, True])
def test_streamify_status_messages_arrive_while_the_run_goes_on(serve, is_async):
    turn_one_shown = threading.Event()

    def root(body):
        if root_turn(body) == 0:
            return repl("print(1)")
        turn_one_shown.wait(30)  # answered only once the consumer holds turn 1's status message
        return repl("SUBMIT(answer='done')")

    server, lm = serve(Script(root))
    program = dspy.streamify(rlmkit.RLM("context -> answer", lm=lm), is_async_program=is_async)

    async def consume():
        items = []
        async for item in program(context="abc"):
            items.append(item)
            if isinstance(item, StatusMessage) and item.message.startswith("Code finished"):
                turn_one_shown.set()
        return items

    started = time.monotonic()
    items = asyncio.run(consume())
    assert turn_one_shown.is_set() and items[-1].answer == "done"
    assert time.monotonic() - started < 25  # not released by the 30 s wait: delivered as it happened

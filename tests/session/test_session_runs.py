"""Started session runs (``Session.start``): client tools that pause the run and resume the same live
REPL, a run cancelled between turns keeping what it finished, a limit on runs at once."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

import rlmkit
from rlmkit.errors import ConfigError, RunCancelled, SessionBusyError, ToolResultTimeout
from rlmkit.run.client_tools import ClientTool, PendingToolCall
from rlmkit.session.runs import RunSlots
from tests.helpers.replies import repl

ADD = {
    "type": "function",
    "name": "add",
    "description": "Add two integers.",
    "parameters": {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
}


def scripted(*replies: str) -> rlmkit.RLM:
    """An RLM whose root model gives ``replies`` turn by turn (the last one again after)."""

    def model(messages: list[dict[str, str]]) -> str:
        turn = sum(1 for m in messages if m["role"] == "assistant")
        return replies[min(turn, len(replies) - 1)]

    return rlmkit.RLM("context, question -> answer", lm=rlmkit.FunctionLM(model))


def run(main: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    return asyncio.run(asyncio.wait_for(main(), 30))


def test_two_client_tool_calls_pause_the_run_and_resume_the_same_repl():
    rlm = scripted(
        repl("secret = 7", "first = add(secret, b=1)", "second = add(a=int(first), b=2)"),
        repl("SUBMIT(answer=f'{first},{second},{secret}')"),
    )

    async def main() -> tuple[Any, list[PendingToolCall], Any, str]:
        async with rlm.session(context="c") as s:
            started = s.start(question="q", tools=[ADD])
            calls = [await started.next()]
            assert started.status == "in_progress" and started.pending == calls
            assert await started.next() == calls[0]  # asked again: the same call, nothing lost
            calls.append(await s.resume(calls[0].call_id, "8"))
            answer = await s.resume(calls[1].call_id, "10")
            return answer, calls, s.variables, s.id

    answer, calls, variables, s_id = run(main)
    assert [(c.name, c.arguments) for c in calls] == [("add", {"a": 7, "b": 1}), ("add", {"a": 8, "b": 2})]
    assert calls[1].arguments_json == '{"a": 8, "b": 2}'
    assert answer.answer == "8,10,7"  # the value set before the first call was there after the second
    nodes = [n for n in answer.trajectory.turns[0].blocks[0].subcalls if n.kind == "client_tool"]
    assert [(n.name, n.reply) for n in nodes] == [("add", "8"), ("add", "10")]
    assert [f"call_{s_id}_{n.id}" for n in nodes] == [c.call_id for c in calls]
    assert {rlmkit.Session.of_call(c.call_id) for c in calls} == {s_id}
    assert {"first", "second", "secret"} <= set(variables)


def test_a_call_that_breaks_the_schema_is_an_error_the_model_reads_and_nothing_pauses():
    rlm = scripted(
        repl(
            "try:\n    add(a='seven')\nexcept ValueError as e:\n    problem = str(e)",
            "SUBMIT(answer=problem)",
        ),
    )

    async def main() -> tuple[Any, dict[str, float]]:
        async with rlm.session(context="c") as s:
            return await s.start(question="q", tools=[ADD]).next(), s.spent

    answer, spent = run(main)
    assert "add(): arguments do not match" in answer.answer
    assert "'seven' is not of type 'integer'" in answer.answer
    assert "'b' is a required property" in answer.answer
    [node] = answer.trajectory.turns[0].blocks[0].subcalls
    assert node.kind == "client_tool" and node.error.startswith("ValueError: add(): arguments")
    assert spent["calls"] == 1  # the root model's one reply: the refused call was not counted


def test_bad_tool_definitions_are_refused_before_any_model_request():
    asked: list[Any] = []
    rlm = rlmkit.RLM("context, question -> answer", lm=rlmkit.FunctionLM(lambda m: asked.append(m) or ""))
    with pytest.raises(ConfigError, match="Python identifier"):
        ClientTool.from_openai({"type": "function", "name": "not a name"})
    with pytest.raises(ConfigError, match="not JSON Schema"):
        ClientTool.from_openai({"type": "function", "name": "f", "parameters": {"type": "nope"}})

    async def shadowing() -> Any:
        async with rlm.session(context="c") as s:
            return await s.start(question="q", tools=[{**ADD, "name": "llm_query"}]).next()

    with pytest.raises(ConfigError, match="'llm_query' cannot be a REPL function"):
        run(shadowing)
    assert asked == []


def test_a_call_left_unanswered_ends_the_run_keeping_its_finished_turns():
    rlm = scripted(repl("kept = 'yes'"), repl("add(a=1, b=2)"))

    async def main() -> tuple[Any, Any]:
        async with rlm.session(context="c") as s:
            started = s.start(question="q", tools=[ADD], tool_result_timeout=0.2)
            assert isinstance(await started.next(), PendingToolCall)
            assert [t.index for t in started.trajectory.turns] == [0]  # readable while it waits
            await started.wait()  # nobody answers
            with pytest.raises(ToolResultTimeout) as caught:
                started.result()
            return caught.value, s.variables

    error, variables = run(main)
    assert "add got no result in 0.2 s" in str(error)
    assert [t.index for t in error.trajectory.turns] == [0, 1] and error.trajectory.status == "error"
    assert "kept" in variables


class GatedModel:
    """A root model that answers one turn per token the test releases: each turn adds one to ``n``."""

    def __init__(self) -> None:
        self.tokens = asyncio.Semaphore(0)
        self.asked = 0
        self.waiting = asyncio.Event()  # set while a turn waits for its token

    async def __call__(self, messages: list[dict[str, str]]) -> str:
        self.asked += 1
        self.waiting.set()
        await self.tokens.acquire()
        self.waiting.clear()
        turn = self.asked  # each turn's code differs: the loop nudges a model that repeats itself
        return repl(f"step_{turn} = {turn} * {turn}", "n = globals().get('n', 0) + 1", f"print(n, {turn})")

    async def asked_for(self, turns: int) -> None:
        """Until the model has been asked for turn ``turns`` (0-based) and waits for its token."""
        while not (self.asked == turns + 1 and self.waiting.is_set()):
            await asyncio.sleep(0.005)


def test_a_cancelled_run_stops_between_turns_and_keeps_what_it_finished():
    model = GatedModel()
    rlm = rlmkit.RLM("context, question -> answer", lm=rlmkit.FunctionLM(model), max_iterations=50)

    async def main() -> tuple[Any, Any, int]:
        async with rlm.session(context="c") as s:
            started = s.start(question="q")
            for turn in range(3):
                await model.asked_for(turn)
                model.tokens.release()
            await model.asked_for(3)  # turn 3 is in flight
            started.cancel()
            model.tokens.release()  # it finishes; no fourth turn starts
            await started.wait()
            with pytest.raises(RunCancelled) as caught:
                started.result()
            return started, caught.value, model.asked

    started, error, asked = run(main)
    assert started.status == "cancelled" and asked == 4
    assert [t.index for t in error.trajectory.turns] == [0, 1, 2, 3]
    assert error.trajectory.status == "cancelled" and started.trajectory is error.trajectory


def test_a_cancelled_run_leaves_its_variables_for_the_next_call():
    model = GatedModel()
    rlm = rlmkit.RLM("context, question -> answer", lm=rlmkit.FunctionLM(model), max_iterations=50)

    async def main() -> tuple[dict[str, str], str]:
        async with rlm.session(context="c") as s:
            started = s.start(question="q")
            await model.asked_for(0)
            with pytest.raises(SessionBusyError):  # one call at a time, while a started run is on
                s.start(question="r")
            with pytest.raises(SessionBusyError):
                await s.acall(question="r")
            model.tokens.release()
            await model.asked_for(1)
            started.cancel()
            model.tokens.release()
            await started.wait()
            return s.variables, started.status

    variables, status = run(main)
    assert status == "cancelled" and variables["n"].startswith("int")


def test_runs_past_the_limit_wait_queued_and_a_queued_cancel_never_starts():
    models = [GatedModel(), GatedModel(), GatedModel()]
    rlms = [rlmkit.RLM("context, question -> answer", lm=rlmkit.FunctionLM(m)) for m in models]

    async def main() -> list[str]:
        slots = RunSlots(running=1, waiting=1)
        sessions = [rlm.session(context="c") for rlm in rlms]
        try:
            first = sessions[0].start(question="q", slots=slots)
            await models[0].asked_for(0)
            second = sessions[1].start(question="q", slots=slots)
            await asyncio.sleep(0)
            assert second.status == "queued" and slots.queued == 1 and slots.full
            third = sessions[2].start(question="q", slots=slots)
            third.cancel()  # cancelled while queued
            first.cancel()
            models[0].tokens.release()
            await first.wait()
            await models[1].asked_for(0)  # the freed slot went to the second run
            assert second.status == "in_progress"
            second.cancel()
            models[1].tokens.release()
            await asyncio.gather(second.wait(), third.wait())
            return [first.status, second.status, third.status, str(models[2].asked)]
        finally:
            for s in sessions:
                s.close()

    assert run(main) == ["cancelled", "cancelled", "cancelled", "0"]

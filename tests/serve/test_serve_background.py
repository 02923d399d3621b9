"""Background responses: ``background: true`` answers at once (queued, then in progress), GET polls,
cancel stops the run between turns keeping what it finished, a run outlives the client that
started it, and a limit bounds how many run at once. The scripted model answers one turn per
token the test releases, so every state is waited for, never slept into."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import httpx
import openai
import pytest

import rlmkit
from rlmkit.testing import FunctionLM, is_root_request
from tests.helpers.replies import repl
from tests.helpers.serve_programs import served

KEY = "background-key"


class TurnGate:
    """A root model that answers one turn per released token; from turn ``answer_at`` it answers."""

    def __init__(self, answer_at: int | None = None):
        self.tokens = threading.Semaphore(0)
        self.asked = 0
        self.answer_at = answer_at

    async def __call__(self, messages: list[dict[str, Any]]) -> str:
        if not is_root_request({"messages": messages}):
            return "sub"
        turn, self.asked = self.asked, self.asked + 1
        if not await asyncio.to_thread(self.tokens.acquire, True, 30):
            raise RuntimeError("the test released no token for this turn")
        if self.answer_at is not None and turn >= self.answer_at:
            return repl("SUBMIT(answer=f'done after {n} turns')")
        return repl("n = globals().get('n', 0) + 1", f"print('turn', {turn}, n)")

    def release(self, turns: int = 1) -> None:
        for _ in range(turns):
            self.tokens.release()


def gated_rlm(gate: TurnGate) -> rlmkit.RLM:
    return rlmkit.RLM("context, question -> answer", lm=FunctionLM(gate), max_iterations=60)


def client(base: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base, api_key=KEY, max_retries=0)


def wait_until(condition: Any, what: str, timeout: float = 20.0) -> Any:
    """Poll ``condition()`` until it returns something truthy (and return it), or fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout:.0f} s")
        time.sleep(0.02)
    return value


def status_is(api: openai.OpenAI, response_id: str, *statuses: str) -> Any:
    def polled() -> Any:
        response = api.responses.retrieve(response_id)
        return response if response.status in statuses else None

    return polled


def test_a_cancelled_background_run_stops_within_one_turn_and_keeps_its_finished_turns():
    gate = TurnGate()
    with served(gated_rlm(gate), api_key=KEY) as base:
        api = client(base)
        started = api.responses.create(model="rlmkit", input="long job", background=True)
        assert started.status == "queued" and started.background is True
        wait_until(status_is(api, started.id, "in_progress"), "the run in progress")
        for turn in range(3):
            wait_until(lambda t=turn: gate.asked == t + 1, f"turn {turn} asked for")
            gate.release()
        wait_until(lambda: gate.asked == 4, "turn 3 in flight")
        cancelling = api.responses.cancel(started.id)
        assert cancelling.id == started.id and cancelling.status in ("in_progress", "cancelled")
        gate.release()  # the turn in flight finishes; no other starts
        cancelled = wait_until(status_is(api, started.id, "cancelled"), "the run cancelled")
        assert gate.asked == 4
        turns = [item for item in cancelled.output if item.type == "reasoning"]
        assert [t.content[0].text.split("]")[0] for t in turns] == [f"[turn {i}" for i in range(1, 5)]
        session = started.id.split("_")[1]
        kept = httpx.get(f"{base}/sessions/{session}", headers={"Authorization": f"Bearer {KEY}"}).json()
        assert kept["variables"]["n"].startswith("int")  # the REPL the finished turns built is there


def test_a_background_run_completes_after_the_client_that_started_it_is_gone():
    gate = TurnGate(answer_at=2)
    with served(gated_rlm(gate), api_key=KEY) as base:
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {KEY}"}) as gone:
            body = gone.post("/responses", json={"model": "rlmkit", "input": "go", "background": True}).json()
        assert body["status"] == "queued"
        gate.release(3)
        api = client(base)
        done = wait_until(status_is(api, body["id"], "completed"), "the run completed")
        assert done.output_text == "done after 2 turns"


def test_background_runs_past_the_limit_wait_queued_and_past_the_queue_are_refused():
    gate = TurnGate()
    with served(gated_rlm(gate), api_key=KEY, background_runs=1, background_queue=1) as base:
        api = client(base)
        first = api.responses.create(model="rlmkit", input="first", background=True)
        wait_until(lambda: gate.asked == 1, "the first run asking its model")
        second = api.responses.create(model="rlmkit", input="second", background=True)
        assert api.responses.retrieve(second.id).status == "queued"
        with pytest.raises(openai.RateLimitError):
            api.responses.create(model="rlmkit", input="third", background=True)
        api.responses.cancel(first.id)
        gate.release()
        wait_until(status_is(api, first.id, "cancelled"), "the first run cancelled")
        wait_until(status_is(api, second.id, "in_progress"), "the queued run started")
        wait_until(lambda: gate.asked == 2, "the second run asking its model")
        api.responses.cancel(second.id)
        gate.release()
        wait_until(status_is(api, second.id, "cancelled"), "the second run cancelled")


def test_background_needs_a_stored_response():
    gate = TurnGate()
    with served(gated_rlm(gate), api_key=KEY) as base:
        with pytest.raises(openai.BadRequestError, match="store"):
            client(base).responses.create(model="rlmkit", input="q", background=True, store=False)
        with pytest.raises(openai.NotFoundError):
            client(base).responses.cancel("resp_" + "0" * 32)
    assert gate.asked == 0

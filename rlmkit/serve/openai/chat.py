"""One chat completion: the program's call, answered whole or streamed as it works.

A whole answer of an RLM (or a session) awaits its call and reads the rest from the trajectory;
a stream, or a DSPy module around an RLM, follows the call's events (``Program.stream``). The
usage is the sum over the call's top-level runs (each run's trajectory counts its whole tree:
sub-calls and child RLMs), so a DSPy module calling its RLM twice is charged for both.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
from sse_starlette import ServerSentEvent

from rlmkit import events as ev
from rlmkit.serve import reasoning
from rlmkit.serve.errors import APIError, bad_request, from_exception
from rlmkit.serve.openai import chat_chunks as chunks
from rlmkit.serve.openai.mapping import ChatRequest, check_schema, content_of, map_inputs
from rlmkit.serve.program import Program
from rlmkit.trajectory import Usage


@dataclasses.dataclass
class CallRecord:
    """What the access log and the response say of a call (never its text)."""

    request_id: str
    session_id: str | None = None
    status: int = 200
    usage: Usage = dataclasses.field(default_factory=Usage)
    run_ids: list[str] = dataclasses.field(default_factory=list)


class Call:
    """A prepared call: its inputs mapped and checked, its program (a budget-capped copy when
    the request lowers the budget), and the session it belongs to, if any."""

    def __init__(
        self,
        program: Program,
        request: ChatRequest,
        record: CallRecord,
        session: Any = None,
        inputs: dict[str, Any] | None = None,
    ):
        """``inputs``: the call's, mapped already (a session opened for this call holds the rest)."""
        self.program, self.request, self.record, self.session = program, request, record, session
        check_schema(program, request)
        held = set(session.inputs) if session is not None else set()
        self.inputs = inputs if inputs is not None else map_inputs(program, request, held)
        if request.budget and session is not None:
            raise bad_request("a session call runs under the session's budget: drop 'budget'", "budget")
        self.runner = _with_budget(program, request.budget) if request.budget else program
        self.cid = chunks.completion_id()
        self.created = int(time.time())

    def _count(self, event: ev.Event) -> None:
        if type(event) is ev.RunFinished and event.depth == 0:
            self.record.usage = self.record.usage.add(event.trajectory.usage)
            self.record.run_ids.append(event.trajectory.meta.run_id)

    async def outcome(self) -> tuple[Any, list[str]]:
        """The call's Prediction, once the run is over, and its reasoning: one text per root
        turn. An RLM's call (or a session's) is awaited as it is, with no listener: its
        trajectory has all a response says. A module around an RLM is followed through its
        events, since its Prediction may carry no trajectory."""
        prediction = await self.runner.acall(self.inputs, self.session)
        if prediction is not None:
            trajectory = prediction.trajectory
            self.record.usage = trajectory.usage
            self.record.run_ids.append(trajectory.meta.run_id)
            return prediction, reasoning.reasoning_turns(trajectory)
        turns: list[str] = []
        async for item in self.runner.stream(self.inputs, self.session):
            if isinstance(item, ev.Event):
                self._count(item)
                reasoning.add_reasoning(turns, item)
            else:
                prediction = item
        return prediction, turns

    async def items(self) -> AsyncIterator[Any]:
        """The run's events as they happen (its usage counted), then its Prediction."""
        async for item in _pumped(lambda: self.runner.stream(self.inputs, self.session)):
            if isinstance(item, ev.Event):
                self._count(item)
            yield item

    async def answer(self) -> str:
        """The whole completion (its JSON), once the run is over."""
        prediction, turns = await self.outcome()
        content = content_of(self.program, self.request, prediction)
        reply = chunks.completion(self.cid, self.program.name, content, "".join(turns), self.record.usage)
        return chunks.dump(reply)

    async def events(self) -> AsyncIterator[bytes]:
        """Server-sent events: the role, the run's reasoning as it happens, the answer, the usage
        chunk when asked for, ``[DONE]``. A failure after the stream began (its status is sent)
        is an OpenAI error object as the last event, as OpenAI streams one."""
        name, cid, created = self.program.name, self.cid, self.created

        def sse(model: Any) -> bytes:
            return _event(chunks.dump(model))

        yield sse(chunks.chunk(cid, name, created, role="assistant", content=""))
        try:
            async for item in self.items():
                if isinstance(item, ev.Event):
                    if (text := reasoning.reasoning_of(item)) is not None:
                        yield sse(chunks.chunk(cid, name, created, reasoning_content=text))
                else:
                    content = content_of(self.program, self.request, item)
                    yield sse(chunks.chunk(cid, name, created, content=content))
        except asyncio.CancelledError:
            self.record.status = 499  # the client closed the stream
            raise
        except Exception as exc:  # noqa: BLE001 - told to the client in OpenAI's shape, then the stream ends
            error = from_exception(exc)
            self.record.status = error.status
            yield _event(json.dumps(error.body()))
            return
        yield sse(chunks.chunk(cid, name, created, finish="stop"))
        if self.request.include_usage:
            yield sse(chunks.chunk(cid, name, created, usage=self.record.usage, empty=True))
        yield _event("[DONE]")


class _Failed:
    def __init__(self, error: BaseException):
        self.error = error


async def _pumped(make_stream: Callable[[], AsyncIterator[Any]]) -> AsyncIterator[Any]:
    """The run's stream, read by a task of its own. A client that goes away makes Starlette
    cancel the response in an anyio cancel scope, where every await is cancelled again: a run
    stream read inside it could not wait for its run's cleanup (stopping the sandbox worker),
    and the worker would outlive the run. Cancelled here, the task is cancelled once, as
    asyncio does, and awaited under a shield until its run has cleaned up."""
    queue: asyncio.Queue[Any] = asyncio.Queue()
    done = object()

    async def pump() -> None:
        try:
            async for item in make_stream():
                queue.put_nowait(item)
        except Exception as exc:  # noqa: BLE001 - handed to the reader, which raises it
            queue.put_nowait(_Failed(exc))
        else:
            queue.put_nowait(done)

    task = asyncio.get_running_loop().create_task(pump())
    try:
        while (item := await queue.get()) is not done:
            if isinstance(item, _Failed):
                raise item.error
            yield item
    finally:
        if not task.done():
            task.cancel()
            with anyio.CancelScope(shield=True), contextlib.suppress(asyncio.CancelledError):
                await task


def _event(data: str) -> bytes:
    """One server-sent event, framed by sse-starlette with OpenAI's newline separator."""
    return ServerSentEvent(data=data, sep="\n").encode()


class _Capped:
    """The program with its RLM's budget lowered to what the request asks (never raised)."""

    def __init__(self, program: Program, rlm: Any):
        self.program, self.rlm = program, rlm

    def stream(self, inputs: dict[str, Any], session: Any = None) -> AsyncIterator[Any]:
        events: AsyncIterator[Any] = self.rlm.stream(**inputs)
        return events

    async def acall(self, inputs: dict[str, Any], session: Any = None) -> Any:
        return await self.rlm.acall(**inputs)


def _with_budget(program: Program, asked: dict[str, float]) -> Any:
    if not program.is_rlm:
        raise bad_request("a per-request budget needs a program that is an rlmkit.RLM", "budget")
    current = program.rlm.budget.limits()
    lowered = {
        name: value if current.get(name) is None else min(value, current[name])
        for name, value in asked.items()
    }
    capped = copy.copy(program.rlm)  # shallow: the models, sandbox and prompts are shared
    try:
        capped.budget = dataclasses.replace(program.rlm.budget, **{**current, **lowered})
    except ValueError as exc:
        raise APIError(400, str(exc), param="budget") from exc
    return _Capped(program, capped)

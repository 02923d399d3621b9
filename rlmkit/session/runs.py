"""A session call that lives beyond whoever started it: ``Session.start`` returns its handle.

    run = session.start(question="...", tools=[weather_tool])
    step = await run.next()                  # the answer, or a PendingToolCall
    while isinstance(step, PendingToolCall):
        step = await run.resume(step.call_id, my_tools[step.name](**step.arguments))

The call runs on a task of its own (never the task of the request that started it), so it goes on
when its starter goes away, and it is stopped only by ``cancel``: between turns, keeping the turns
it finished (the trajectory of the ``RunCancelled`` it ends with) and the variables it set (the
session's REPL and checkpoint). ``RunSlots`` bounds how many such runs go at once: one that finds
no slot free stays ``queued`` until one is.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, Literal

import dspy

from rlmkit.errors import ConfigError, RunCancelled
from rlmkit.run.client_tools import PendingToolCall, RunControl
from rlmkit.trajectory import Trajectory, Usage

RunStatus = Literal["queued", "in_progress", "completed", "failed", "cancelled"]


class RunSlots:
    """At most ``running`` started runs go at once; the others wait ``queued``, in order. ``waiting``
    bounds how many may wait (``full`` says when one more would be too many), None: no bound."""

    def __init__(self, running: int, waiting: int | None = None):
        if running < 1 or (waiting is not None and waiting < 0):
            raise ConfigError(f"run slots need running >= 1 and waiting >= 0, got {running}, {waiting}")
        self.running, self.waiting = running, waiting
        self._free = asyncio.Semaphore(running)
        self.queued = 0  # runs waiting for a slot now
        self.busy = 0  # runs holding one

    @property
    def full(self) -> bool:
        """Every slot is taken and the queue is at its bound: a new run would wait past it."""
        return self.busy >= self.running and self.waiting is not None and self.queued >= self.waiting

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        self.queued += 1
        try:
            await self._free.acquire()
        finally:
            self.queued -= 1
        self.busy += 1
        try:
            yield
        finally:
            self.busy -= 1
            self._free.release()


class SessionRun:
    """One started call of a session: its status, its answer or error, the tool calls it waits on,
    and ``cancel``. Made by ``Session.start``."""

    def __init__(
        self,
        call: Callable[[], Coroutine[Any, Any, dspy.Prediction]],
        control: RunControl,
        slots: RunSlots | None = None,
    ):
        self.id = uuid.uuid4().hex
        self.control = control
        self.status: RunStatus = "queued"
        self.prediction: dspy.Prediction | None = None
        self.error: BaseException | None = None
        self._turns_told, self._usage_told = 0, Usage()  # what ``news`` has handed out
        self._call, self._slots = call, slots
        self._over = asyncio.Event()
        self._task = asyncio.ensure_future(self._go())  # owned here: nobody's request task

    async def _go(self) -> None:
        try:
            async with self._slots.slot() if self._slots is not None else contextlib.nullcontext():
                self.control.check_stop()  # cancelled while it was queued: it never starts
                self.status = "in_progress"
                self.prediction = await self._call()
            self.status = "completed"
        except RunCancelled as exc:
            self.status, self.error = "cancelled", exc
        except asyncio.CancelledError as exc:  # the loop itself is ending (a server stopping)
            self.status, self.error = "cancelled", RunCancelled(f"the run was stopped: {exc}")
            raise
        except Exception as exc:  # noqa: BLE001 - the run's failure is its outcome, read by next()
            self.status, self.error = "failed", exc
        finally:
            self._over.set()

    @property
    def done(self) -> bool:
        return self._over.is_set()

    @property
    def pending(self) -> list[PendingToolCall]:
        """The client tool calls the run waits on now, oldest first."""
        return self.control.pending

    @property
    def trajectory(self) -> Trajectory | None:
        """What the run has finished: the answer's trajectory, or the error's; while it runs, the
        trajectory as it grows (its finished turns); None before it starts."""
        if self.prediction is not None:
            return self.prediction.trajectory  # type: ignore[no-any-return]
        return getattr(self.error, "trajectory", None) or self.control.trajectory

    def news(self) -> tuple[int, Usage]:
        """For a caller that tells the run step by step (a server's response per pause): how many
        turns it told before, and the usage spent since. Each call moves the mark to now."""
        trajectory = self.trajectory
        if trajectory is None:
            return self._turns_told, Usage()
        told, before = self._turns_told, self._usage_told
        self._turns_told, self._usage_told = len(trajectory.turns), trajectory.usage
        now = trajectory.usage
        spent = Usage(
            calls=now.calls - before.calls,
            prompt_tokens=now.prompt_tokens - before.prompt_tokens,
            completion_tokens=now.completion_tokens - before.completion_tokens,
            cost=now.cost - before.cost,
            cached_calls=now.cached_calls - before.cached_calls,
        )
        return told, spent

    async def next(self) -> dspy.Prediction | PendingToolCall:
        """The run's answer, or the oldest tool call it waits on, whichever comes first; the run's
        error when it failed or was cancelled (a ``RunError`` carries its trajectory)."""
        while not self.done:
            if self.control.pending:
                return self.control.pending[0]
            await _first(self._over.wait(), self.control.paused.wait())
        return self.result()

    def result(self) -> dspy.Prediction:
        """The answer of a run that is over (its error raised when it has none)."""
        if not self.done:
            raise RuntimeError("the run is not over")
        if self.error is not None:
            raise self.error
        assert self.prediction is not None
        return self.prediction

    async def resume(self, call_id: str, output: Any) -> dspy.Prediction | PendingToolCall:
        """Give the client's result of tool call ``call_id``; then as ``next``."""
        self.control.resume(call_id, output)
        return await self.next()

    def cancel(self) -> None:
        """Stop the run between turns (a tool call it waits on fails now); it keeps what it finished."""
        if not self.done:
            self.control.request_stop()

    def abort(self) -> None:
        """Stop the run now, mid-turn (its task cancelled): for a process that is ending, which
        cannot wait for a turn to finish. ``cancel`` is the stop that keeps the turn in flight."""
        self._task.cancel()

    async def wait(self) -> None:
        """Until the run is over, however it ends."""
        await self._over.wait()


async def _first(*waits: Coroutine[Any, Any, Any]) -> None:
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()


__all__ = ["RunSlots", "RunStatus", "SessionRun"]

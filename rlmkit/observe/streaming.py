"""Streaming a run: ``RLM.stream()`` and ``dspy.streamify(rlm)``.

    async for item in rlm.stream(context=..., question=...):
        if isinstance(item, dspy.Prediction): ...     # the last item of a successful run
        else: print(type(item).__name__)             # rlmkit.events.*, as they happen

A failed run yields its events (the last is ``RunFinished`` with ``error`` and
``trajectory``), then raises the error (which carries ``.trajectory`` too).

Under ``dspy.streamify(rlm)`` the run sends DSPy ``StatusMessage``s for each turn, cell and
child run (and whatever the status provider says for model calls). They are handed to the
consumer's event loop thread-safely: a sync RLM runs its loop in another thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Iterator
from contextvars import ContextVar
from typing import Any

import dspy

from rlmkit import events as ev
from rlmkit.observe.lm_view import LMView

_caller_loop: ContextVar[asyncio.AbstractEventLoop | None] = ContextVar("rlmkit_caller_loop", default=None)


async def stream_run(rlm: Any, inputs: dict[str, Any]) -> AsyncIterator[Any]:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()
    loop_thread = threading.get_ident()

    def put(event: ev.Event) -> None:
        if threading.get_ident() == loop_thread:
            queue.put_nowait(event)
        else:  # a tool runs in the cell's thread
            loop.call_soon_threadsafe(queue.put_nowait, event)

    with ev.listen(put):  # the task copies this context: its run, and only it, reports to the queue
        task = asyncio.create_task(rlm.acall(**inputs))
    done = object()
    task.add_done_callback(lambda _: loop.call_soon(queue.put_nowait, done))  # after events already queued
    try:
        while (item := await queue.get()) is not done:
            yield item
        yield task.result()  # the Prediction, or the run's error raised here
    finally:
        if not task.done():  # the consumer stopped early
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


@contextlib.contextmanager
def remember_caller_loop() -> Iterator[None]:
    """Under ``dspy.streamify`` a sync RLM is called in an anyio worker thread: remember the
    event loop that thread serves, where status messages must be delivered."""
    if dspy.settings.get("send_stream") is None:
        yield
        return
    try:
        import anyio.from_thread

        loop = anyio.from_thread.run_sync(asyncio.get_running_loop)
    except Exception:  # noqa: BLE001 - not an anyio worker thread: the run's own loop is the caller's
        loop = None
    token = _caller_loop.set(loop)
    try:
        yield
    finally:
        _caller_loop.reset(token)


def default_status(event: ev.Event) -> str | None:
    """The status line ``dspy.streamify`` shows for an event (None: nothing)."""
    kind = type(event)
    where = f" (child run, depth {event.depth})" if event.depth else ""
    if kind is ev.RunStarted and event.depth:
        return f"Starting a child RLM run at depth {event.depth}..."
    if kind is ev.TurnStarted:
        return f"Turn {event.turn.index + 1}{where}: asking the root model..."
    if kind is ev.CellStarted:
        code = event.block.code.strip()
        return f"Running code{where}: {code.splitlines()[0][:80] if code else ''}"
    if kind is ev.CellFinished:
        block = event.block
        state = "timed out" if block.timed_out else ("raised an error" if block.error else "finished")
        return f"Code {state} in {block.duration_s:.1f}s{where}."
    return None


class StatusSender:
    """Sends status messages for rlmkit events into the ``dspy.streamify`` stream.

    A status provider may define ``rlm_status_message(event) -> str | None`` to word them
    itself; its ``lm_start/end_status_message`` hooks are asked for model calls."""

    def __init__(self, stream: Any, provider: Any, loop: asyncio.AbstractEventLoop):
        self.stream, self.provider, self.loop = stream, provider, loop
        self.custom = getattr(provider, "rlm_status_message", None)

    def __call__(self, event: ev.Event) -> None:
        kind = type(event)
        if kind is ev.ModelRequest and self.provider is not None:
            text = self.provider.lm_start_status_message(LMView(event.lm), {"messages": event.messages})
        elif kind is ev.ModelReply and self.provider is not None:
            text = self.provider.lm_end_status_message([event.completion.text] if event.completion else None)
        else:
            text = self.custom(event) if self.custom is not None else default_status(event)
        if text:
            from dspy.streaming.messages import StatusMessage

            asyncio.run_coroutine_threadsafe(self.stream.send(StatusMessage(text)), self.loop)


def streamify_listener(stream: Any, callbacks: list[Any]) -> ev.Listener | None:
    from dspy.streaming.messages import StatusStreamingCallback

    status = next((c for c in callbacks if isinstance(c, StatusStreamingCallback)), None)
    loop = _caller_loop.get()
    if loop is None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return None
    return StatusSender(stream, status.status_message_provider if status is not None else None, loop)

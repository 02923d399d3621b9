"""Host side: the event loop's end of a worker's pipe (``WorkerHost.arun_then``): waiting for the
worker's next frame with a reader on the pipe instead of a blocked thread, and calling a host function
from the loop (its coroutine form in place, a plain function on a thread).
"""

from __future__ import annotations

import asyncio
import functools
import time
from typing import Any

from rlmkit.concurrency.threads import in_thread
from rlmkit.sandbox.base import HostFunction
from rlmkit.sandbox.worker_side import wire


async def next_frame(chan: wire.Channel, deadline: float | None) -> bytes:
    """The worker's next frame, waited for by the event loop (a reader on the pipe) until
    ``deadline``; raises ``wire.ChannelTimeout`` after it, like ``Channel.recv_frame``."""
    loop = asyncio.get_running_loop()
    while (frame := chan.take_frame()) is None:
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            raise wire.ChannelTimeout()
        woken = loop.create_future()
        loop.add_reader(chan.rfd, _wake, woken, True)
        timer = None if remaining is None else loop.call_later(remaining, _wake, woken, False)
        try:
            readable = await woken
        finally:
            loop.remove_reader(chan.rfd)
            if timer is not None:
                timer.cancel()
        if not readable:
            raise wire.ChannelTimeout()
        chan.fill()
    return frame


def _wake(future: asyncio.Future, value: bool) -> None:
    if not future.done():
        future.set_result(value)


async def call_on_loop(fn: HostFunction, args: tuple, kwargs: dict) -> Any:
    """A host function called from the event loop: its coroutine form as a task of its own (a copy
    of this context, as a cell thread had: what its events set stays in it), or, for a plain
    function that may block (a user's tool), on a thread."""
    acall = getattr(fn, "acall", None)
    if acall is None:
        return await in_thread(functools.partial(fn, *args, **kwargs))
    return await asyncio.ensure_future(acall(*args, **kwargs))

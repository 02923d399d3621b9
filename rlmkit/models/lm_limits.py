"""A concurrency limit shared by threads and event loops (the LM layer's in-flight cap)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator


class ConcurrencyLimit:
    """At most ``limit`` calls in flight, counted across threads and event loops alike.

    A released slot is handed straight to the oldest waiter, so waiters are served in order.
    """

    def __init__(self, limit: int):
        self.limit = limit
        self._active = 0
        self._lock = threading.Lock()
        self._waiters: deque[Callable[[], None]] = deque()

    def _try_take(self) -> bool:
        if self._active < self.limit:
            self._active += 1
            return True
        return False

    def release(self) -> None:
        with self._lock:
            if not self._waiters:
                self._active -= 1
                return
            hand_over = self._waiters.popleft()
        hand_over()  # the slot passes on; _active stays the same

    @contextlib.contextmanager
    def slot(self) -> Iterator[None]:
        with self._lock:
            event = None if self._try_take() else threading.Event()
            if event is not None:
                self._waiters.append(event.set)
        if event is not None:
            event.wait()
        try:
            yield
        finally:
            self.release()

    @contextlib.asynccontextmanager
    async def aslot(self) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()

        def grant() -> None:  # may run in another thread: resolve on the waiter's loop
            loop.call_soon_threadsafe(
                lambda: self.release() if future.cancelled() else future.set_result(None)
            )

        with self._lock:
            waiting = not self._try_take()
            if waiting:
                self._waiters.append(grant)
        if waiting:
            try:
                await future
            except asyncio.CancelledError:
                with self._lock:
                    if grant in self._waiters:  # not granted yet: just leave the queue
                        self._waiters.remove(grant)
                raise  # if it was granted, grant() sees the cancellation and releases
        try:
            yield
        finally:
            self.release()

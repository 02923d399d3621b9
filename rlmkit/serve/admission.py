"""How many calls run at once, and how many may wait: past the queue a request is refused at
once with 429 and ``Retry-After``, which OpenAI clients (the SDK, litellm) wait out and retry.

Calls beyond ``max_running`` would only queue inside the RLM anyway, for a sandbox worker and the
model's slots, while holding their request open and their inputs in memory; a bounded queue
says "busy" while the client can still do something about it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from rlmkit.serve.errors import APIError


class Admission:
    def __init__(self, max_running: int = 16, max_waiting: int = 64, retry_after_s: int = 1):
        if max_running < 1 or max_waiting < 0:
            raise ValueError("max_running must be >= 1 and max_waiting >= 0")
        self.max_running, self.max_waiting, self.retry_after_s = max_running, max_waiting, retry_after_s
        self.running = 0
        self.waiting = 0
        self._slots: asyncio.Semaphore | None = None  # made on the serving loop, at the first call

    def check(self) -> None:
        """Refuse now (429) when every slot is taken and the queue is full."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_running)
        if self._slots.locked() and self.waiting >= self.max_waiting:
            raise APIError(
                429,
                f"busy: {self.running} calls running and {self.waiting} waiting; retry later",
                type="rate_limit_error",
                code="server_busy",
                headers={"Retry-After": str(self.retry_after_s)},
            )

    @contextlib.asynccontextmanager
    async def slot(self, check: bool = True) -> AsyncIterator[None]:
        """Run inside once a slot is free (``check``: refuse first when the queue is full)."""
        if check or self._slots is None:
            self.check()
        self.waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self.waiting -= 1
        self.running += 1
        try:
            yield
        finally:
            self.running -= 1
            self._slots.release()

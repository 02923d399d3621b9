"""Threads for blocking work a run hands off its event loop (a cell, the sandbox's start and
close, hashing a big input): reused, never queued.

A fresh ``threading.Thread`` per call cost about 2.4 ms before the cell's code started (thread
start-up and the hand-over of the GIL; a turn of the benchmark script took 4.9 ms in process,
2.3 ms with reused threads). A bounded pool would be cheaper still but could deadlock: a nested
RLM blocks its thread while its children's cells need threads of their own. So a call takes an
idle thread when there is one and starts a new one when there is not; a thread idle for a
minute exits. Threads are daemons, so a cell stuck at interpreter exit does not hold it up.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import queue
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

IDLE_EXIT_S = 60.0
log = logging.getLogger("rlmkit")


class ReusedThreads:
    """Run each submitted callable on an idle thread, or on a new one if none is idle."""

    def __init__(self, name: str, idle_exit_s: float = IDLE_EXIT_S):
        self.name, self.idle_exit_s = name, idle_exit_s
        self._jobs: queue.SimpleQueue[Callable[[], object]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0  # threads waiting for a job that no submit has claimed yet
        self.started = 0

    def submit(self, job: Callable[[], object]) -> None:
        """Run ``job()`` on an idle thread or a new one; what it raises is logged, not re-raised."""
        with self._lock:
            if self._idle:
                self._idle -= 1  # claimed: that thread, or another one as free, takes this job
            else:
                self.started += 1
                threading.Thread(target=self._work, name=self.name, daemon=True).start()
        self._jobs.put(job)

    def _work(self) -> None:
        while True:
            try:
                job = self._jobs.get(timeout=self.idle_exit_s)
            except queue.Empty:
                with self._lock:
                    if self._idle:  # unclaimed: leave; a claim already made is served by another
                        self._idle -= 1
                        return
                continue  # every idle thread is claimed: a job is on its way
            try:
                job()
            except Exception:  # a job that raised (its loop closed under it) must not end the thread
                log.warning("rlmkit: a background job failed", exc_info=True)
            with self._lock:
                self._idle += 1


_pool = ReusedThreads("rlmkit-cell")


def _new_pool_after_fork() -> None:  # a forked child has none of the parent's threads
    global _pool
    _pool = ReusedThreads("rlmkit-cell")


os.register_at_fork(after_in_child=_new_pool_after_fork)


def submit(job: Callable[[], object]) -> None:
    _pool.submit(job)


async def in_thread(fn: Callable[..., T], *args: object) -> T:
    """Run blocking ``fn`` on a thread of its own (reused, never queued, so nested RLMs that block
    one thread each while their children run cannot deadlock). It runs in a copy of the caller's
    context, so sub-calls made from a cell see the run's DSPy settings and nest their events
    under the cell."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def target() -> None:
        try:
            result = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
            loop.call_soon_threadsafe(_fail, future, exc)
        else:
            loop.call_soon_threadsafe(_settle, future, result)

    context = contextvars.copy_context()
    submit(lambda: context.run(target))
    return await future


def _settle(future: asyncio.Future[T], result: T) -> None:
    if not future.cancelled():
        future.set_result(result)


def _fail(future: asyncio.Future[T], exc: BaseException) -> None:
    if not future.cancelled():
        future.set_exception(exc)

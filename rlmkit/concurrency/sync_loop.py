"""One long-lived event loop for sync calls (``RLM.__call__``, ``LM.complete``).

Sync entry points run their async twin on this loop, in a daemon thread started on first
use, so connection pools (one per loop) are reused across calls instead of leaked per
call. A forked child has no loop thread: it starts its own on its first sync call.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import threading
from collections.abc import Coroutine
from typing import TypeVar

T = TypeVar("T")

CANCEL_WAIT_S = 30.0  # how long Ctrl-C waits for a cancelled call to close what it holds
_loop_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def _forget_loop_after_fork() -> None:
    global _loop, _loop_lock
    _loop, _loop_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_loop_after_fork)


def shared_loop() -> asyncio.AbstractEventLoop:
    """The background loop of sync calls."""
    global _loop
    with _loop_lock:
        if _loop is None:
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, name="rlmkit-loop", daemon=True).start()
        return _loop


def run_sync(coro: Coroutine[object, object, T]) -> T:
    """Run ``coro`` to completion from sync code and return its result.

    Ctrl-C (KeyboardInterrupt) while it waits cancels ``coro`` and waits for it to end (a run
    closes its worker, a session marks its REPL for a rebuild), then raises: it stops this call,
    not the loop every sync call shares. Called from the shared loop's own thread (a sync callback
    inside a sync run) it cannot wait on that loop, so it runs ``coro`` in a fresh thread with
    its own loop.
    """
    loop = shared_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is not loop:  # blocking another loop's thread is the caller's choice, as with any sync call
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return future.result()
        except KeyboardInterrupt:
            future.cancel()
            try:
                future.result(timeout=CANCEL_WAIT_S)
            except BaseException:  # noqa: BLE001, S110 - its CancelledError: the call is over
                pass
            raise
    values: list[T] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            values.append(asyncio.run(coro))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            errors.append(exc)

    thread = threading.Thread(
        target=contextvars.copy_context().run, args=(target,), name="rlmkit-sync-call", daemon=True
    )
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return values[0]

"""Background responses (``background: true``): the run goes on a task of its own, not the
request's, and the response is answered at once with status ``queued``; ``GET`` reads it as it goes
(``in_progress``, then ``completed``, ``failed`` or ``cancelled``), and ``cancel`` stops its run
between turns. A background run rides on the response's session (a ``SessionRun``), so a cancelled
one keeps its finished turns (as reasoning items) and its REPL (for a follow-up).

At most ``running`` background runs go at once; the others wait ``queued`` (``RunSlots``), at most
``waiting`` of them: one more is a 429.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from rlmkit.serve.errors import APIError
from rlmkit.serve.openai.stored import Stored, StoredResponses
from rlmkit.session.runs import RunSlots, SessionRun

DEFAULT_RUNNING = 4
DEFAULT_WAITING = 64
CLOSE_GRACE_S = 10.0  # a stopping app waits this long for cancelled runs to finish their turn


class BackgroundResponses:
    """The background runs of one app, by response id, and the slots they share."""

    def __init__(self, running: int = DEFAULT_RUNNING, waiting: int = DEFAULT_WAITING):
        self.slots = RunSlots(running, waiting)
        self.runs: dict[str, SessionRun] = {}  # the runs not over yet
        self._watchers: set[asyncio.Task[None]] = set()  # held here: a task nobody holds may vanish

    def admit(self) -> None:
        """Room for one more (a 429 when every slot is taken and the queue is full)."""
        if self.slots.full:
            raise APIError(
                429,
                f"{self.slots.busy} background runs are running and {self.slots.queued} waiting, the most "
                "this server keeps: retry later or cancel one",
                type="rate_limit_error",
                code="too_many_background_runs",
                headers={"Retry-After": "5"},
            )

    def watch(
        self,
        response_id: str,
        run: SessionRun,
        finish: Callable[[object], dict[str, Any]],
        kept: StoredResponses,
        session_id: str,
    ) -> None:
        """Keep the response up to date as ``run`` goes: ``finish(outcome)`` builds its body once
        the run answers, pauses at a tool call, fails or is cancelled (the outcome: the answer,
        the ``PendingToolCall``, or the error)."""
        self.runs[response_id] = run

        async def follow() -> None:
            try:
                outcome: Any = await run.next()
            except Exception as exc:  # noqa: BLE001 - the run's failure is the response's outcome
                outcome = exc
            finally:
                self.runs.pop(response_id, None)
            kept.put(response_id, Stored(finish(outcome), session_id))

        task = asyncio.ensure_future(follow())
        self._watchers.add(task)
        task.add_done_callback(self._watchers.discard)

    def status(self, response_id: str) -> str | None:
        """The live status of a background response still running (None: it is over, or not one)."""
        run = self.runs.get(response_id)
        return run.status if run is not None else None

    def cancel(self, response_id: str) -> bool:
        """Ask the run of ``response_id`` to stop between turns (False: none is running)."""
        run = self.runs.get(response_id)
        if run is None:
            return False
        run.cancel()
        return True

    async def close(self) -> None:
        """The app is stopping: every run is cancelled, and its response kept as it ended."""
        for run in list(self.runs.values()):
            run.cancel()
        watchers = list(self._watchers)
        if watchers:
            _, pending = await asyncio.wait(watchers, timeout=CLOSE_GRACE_S)
            if pending:  # a turn that would not finish in time: stopped where it is
                for run in list(self.runs.values()):
                    run.abort()
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.gather(*pending, return_exceptions=True)

"""What ``rlmkit eval`` shows while it runs: live counts on its bar, or a line per run in a log."""

from __future__ import annotations

import threading
import time
from typing import Any

from rlmkit import events as ev


class ProgressLines:
    """One line per finished run, for a log: how far, how the run ended, the time left (this
    process's runs so far, per run, times the runs still to do)."""

    def __init__(self) -> None:
        self.started, self.todo, self.finished = time.monotonic(), 0, 0

    def start(self, todo: int) -> None:
        self.started, self.todo, self.finished = time.monotonic(), todo, 0

    def line(self, row: Any, completed: int, total: int) -> str:
        self.finished += 1
        elapsed = time.monotonic() - self.started
        left = elapsed / self.finished * max(0, self.todo - self.finished)
        replayed = f" ({row.cached_calls} of {row.calls} calls from the cache)" if row.cached_calls else ""
        return (
            f"[{completed}/{total}] {row.id}#{row.sample} {row.status}, score {row.score:.2f} in "
            f"{row.wall_s:.0f} s{replayed}; {_minutes(elapsed)} elapsed, about {_minutes(left)} left"
        )


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


class LiveCounts:
    """One run's share of the bar's live fields, from its events: runs in flight and model
    calls made so far (examples run as Ray tasks report when they finish instead)."""

    lock = threading.Lock()  # one bar, many runs in many threads

    def __init__(self, progress: Any, task: Any):
        self.progress, self.task = progress, task

    def __call__(self, event: ev.Event) -> None:
        kind = type(event)
        if kind is ev.ModelReply and event.completion is not None:
            self._add("calls", 1)
        elif kind in (ev.RunStarted, ev.RunFinished) and event.depth == 0:
            self._add("running", 1 if kind is ev.RunStarted else -1)

    def _add(self, field: str, amount: int) -> None:
        with self.lock:
            value = self.progress.tasks[self.task].fields[field] + amount
            self.progress.update(self.task, **{field: value})

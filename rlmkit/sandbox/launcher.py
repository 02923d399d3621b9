"""Host side: what a sandbox backend on the worker host provides, a ``Launcher`` that starts
``worker_side/worker.py`` somewhere and the ``WorkerHandle`` it hands back (its pipe, and how to
interrupt, describe and stop it). ``Launcher.acquire`` is how a sandbox, a session or anything
else gets a worker for one run: a pre-started one from the pool of its configuration
(``pool.py``) when there is one.
"""

from __future__ import annotations

import dataclasses
import functools
from abc import ABC, abstractmethod
from collections.abc import Hashable

from rlmkit.sandbox import pool
from rlmkit.sandbox.base import SandboxLimits
from rlmkit.sandbox.worker_side import wire


class WorkerHandle(ABC):
    """The host's handle on one launched worker process: its pipe, and how to interrupt, describe
    and stop it."""

    channel: wire.Channel
    pid: int | None = None
    workdir: str | None = None

    @abstractmethod
    def interrupt(self) -> None:
        """Raise KeyboardInterrupt in the running cell (a worker that ignores it is stopped)."""

    @abstractmethod
    def describe_exit(self, wait_s: float) -> str | None:
        """How the worker ended ("exited with status 1", "killed by SIGKILL"), waiting up to
        ``wait_s``; None when it is still alive."""

    @abstractmethod
    def stderr_tail(self) -> str:
        """The end of what the worker wrote to stderr, or "(no output)"."""

    @abstractmethod
    def stop(self) -> None:
        """Kill the worker and remove what it left behind. Idempotent."""

    # True when ``stop_nowait`` never blocks, so the event loop may call it in place
    stops_at_once = False

    def stop_nowait(self) -> None:
        """Kill the worker now; removing what it left behind may finish in the background."""
        self.stop()

    def alive(self) -> bool:
        """False once the worker is known to have ended (a pool skips such a worker)."""
        return True

    def forget(self) -> None:
        """Let go of the worker without stopping it: a forked child's copy of its parent's worker."""


class Launcher(ABC):
    """Starts ``worker_side/worker.py`` under ``limits`` and connects its pipe; the worker then
    says ``ready``.

    ``acquire`` is how a sandbox gets its worker: a pre-started one of the same configuration
    when its pool has one (``pool.py``), else a new one from ``launch``. A launcher whose
    workers may be pooled says how to tell configurations apart (``pool_key``)."""

    @abstractmethod
    def launch(self, limits: SandboxLimits) -> WorkerHandle:
        """Start a new worker under ``limits``."""

    def pool_key(self, limits: SandboxLimits) -> Hashable | None:
        """What sets this launcher's workers apart under ``limits`` (equal keys: interchangeable
        workers), or None when they must not be pooled."""
        return None

    def acquire(self, limits: SandboxLimits) -> WorkerHandle:
        """A worker for one run (or one restart) that nothing else has used: a pooled one, or a new
        one. Either way the pool is refilled in the background, after a new one is on its way."""
        worker = self.take(limits, refill=False) or self.launch(limits)
        self.prewarm(limits)
        return worker

    def take(self, limits: SandboxLimits, refill: bool = True) -> WorkerHandle | None:
        """A pooled worker (it is the caller's now), or None at once when the pool has none."""
        key = self.pool_key(limits)
        worker = None if key is None else pool.take(key)
        if refill:
            self.prewarm(limits)
        return worker

    def prewarm(self, limits: SandboxLimits) -> None:
        """Fill the pool for ``limits`` in the background (so that even a first run finds a worker)."""
        key = self.pool_key(limits)
        if key is not None:
            pool.refill(key, functools.partial(self.launch, dataclasses.replace(limits)))

"""Host side: pre-started workers, per launcher configuration; a run takes one instead of waiting
for a start.

A confined worker costs CPU to start (forked: the fork and the confinement; exec'd: the
interpreter and its modules too; ``benchmarks/sandbox/pool_cost.py`` measures each, with the memory an
idle worker holds, in ``benchmarks/results/pool_cost.json``). A run sends its first model
request before it needs its worker, but with a fast model the first turn waits for the start,
and child RLMs started together queue behind each other's starts. A pool keeps a few workers
started ahead, off the critical path.

A pooled worker is launched exactly as a fresh one (same launcher, same configuration: it
confines itself before it says ``ready``) and has received nothing yet: the run's inputs cross
into it when a run takes it (``WorkerHost`` sends them after the ready handshake, pooled or
not), so they still cross once. The rules:

- one worker, one run: a taken worker never comes back to a pool; its run stops it at the end
  (a restart takes another one). Nothing of one run can reach the next through a pool.
- bounded: at most ``size`` idle workers per configuration; a worker idle longer than
  ``idle_s`` is stopped. ``size=0`` turns pooling off (every run starts its own worker).
- refilled in the background: a take asks one daemon thread (the keeper) for a replacement.
- reaped at exit (atexit); a forked child forgets its parent's idle workers without stopping them.

Settings: ``configure(size=..., idle_s=...)``, or the environment (``RLMKIT_POOL_SIZE``,
``RLMKIT_POOL_IDLE_S``) read at import.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Protocol

from rlmkit.errors import ConfigError


class PoolableWorker(Protocol):
    """What a pool needs of a worker (``launcher.WorkerHandle`` has it; no import, so no cycle)."""

    pid: int | None

    def alive(self) -> bool: ...

    def stop(self) -> None: ...

    def stop_nowait(self) -> None: ...

    def forget(self) -> None: ...


log = logging.getLogger("rlmkit")
EXIT_WAIT_S = 5.0  # at exit, how long a spawn under way may take to land (then it is stopped)


@dataclass(frozen=True)
class PoolSettings:
    size: int = 2  # idle workers kept per configuration (each holds a little private memory)
    idle_s: float = 300.0  # an idle worker older than this is stopped (refilled at the next take)


def _from_environment() -> PoolSettings:
    try:
        return _checked(
            int(os.environ.get("RLMKIT_POOL_SIZE", PoolSettings.size)),
            float(os.environ.get("RLMKIT_POOL_IDLE_S", PoolSettings.idle_s)),
        )
    except (ValueError, ConfigError) as exc:
        log.warning("rlmkit: RLMKIT_POOL_SIZE / RLMKIT_POOL_IDLE_S ignored (%s)", exc)
        return PoolSettings()


def _checked(size: int, idle_s: float) -> PoolSettings:
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise ConfigError(f"pool size must be an int >= 0, not {size!r}")
    if not isinstance(idle_s, int | float) or isinstance(idle_s, bool) or not idle_s > 0:
        raise ConfigError(f"pool idle_s must be a number > 0, not {idle_s!r}")
    return PoolSettings(size, float(idle_s))


class WorkerPool:
    """Idle pre-started workers of one configuration; ``spawn`` starts one more."""

    def __init__(self, spawn: Callable[[], PoolableWorker]):
        self._spawn = spawn
        self._idle: deque[tuple[float, PoolableWorker]] = deque()  # (since, worker), oldest first
        self._filling = 0  # spawns asked of the keeper that have not landed
        self.taken = 0  # workers handed out (a count for tests and the docs' measurements)

    def take(self) -> PoolableWorker | None:
        """An idle live worker (it is the caller's now), or None."""
        dead = []
        worker = None
        with _lock:
            while self._idle:
                _, candidate = self._idle.popleft()
                if candidate.alive():
                    worker = candidate
                    self.taken += 1
                    break
                dead.append(candidate)
        for candidate in dead:
            candidate.stop_nowait()
        return worker

    # -- on the keeper's thread
    def _wanted(self) -> int:
        return 0 if _closed else _settings.size - len(self._idle) - self._filling

    def _fill_one(self) -> None:
        try:
            worker = None if _closed else self._spawn()
        except Exception:  # noqa: BLE001 - a failed refill costs the next run a fresh start, no more
            log.warning("rlmkit: a pooled sandbox worker could not be started", exc_info=True)
            worker = None
        with _lock:
            self._filling -= 1
            keep = worker is not None and not _closed and len(self._idle) < _settings.size
            if keep:
                self._idle.append((time.monotonic(), worker))
            _idle_changed.notify_all()
        if worker is not None and not keep:
            worker.stop_nowait()

    def _pop_expired(self, now: float, keep: int) -> list:
        """Workers idle past ``idle_s``, and any beyond ``keep`` (the oldest first)."""
        out = []
        while self._idle and (len(self._idle) > keep or now - self._idle[0][0] >= _settings.idle_s):
            out.append(self._idle.popleft()[1])
        return out

    def _forget(self) -> None:
        for _, worker in self._idle:
            worker.forget()
        self._idle.clear()


class _Keeper:
    """One daemon thread for every pool: it starts replacements, one at a time (a start is mostly
    the new worker's own CPU; two at once would only compete with the runs for it), and stops
    workers idle past their time."""

    def __init__(self) -> None:
        self.asked: deque[WorkerPool] = deque()
        self._thread: threading.Thread | None = None

    def fill(self, pool: WorkerPool) -> None:
        with _lock:
            wanted = pool._wanted()
            if wanted <= 0:
                return
            pool._filling += wanted
            self.asked.extend([pool] * wanted)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="rlmkit-sandbox-pool", daemon=True)
                self._thread.start()
            _idle_changed.notify_all()

    def _run(self) -> None:
        while True:
            with _lock:
                if not self.asked:
                    _idle_changed.wait(timeout=_next_expiry_in())
                pool = self.asked.popleft() if self.asked else None
            if pool is not None:
                pool._fill_one()
            _stop_expired()


_lock = threading.Lock()
_idle_changed = threading.Condition(_lock)
_pools: dict[Hashable, WorkerPool] = {}
_keeper = _Keeper()
_settings = _from_environment()
_closed = False


def take(key: Hashable) -> PoolableWorker | None:
    """A pre-started worker of configuration ``key`` (it is the caller's now), or None when that
    pool is empty, not made yet, or pooling is off."""
    with _lock:
        pool = _pools.get(key)
    return None if pool is None or _settings.size == 0 else pool.take()


def refill(key: Hashable, spawn: Callable[[], PoolableWorker]) -> None:
    """Ask the keeper to bring the pool of configuration ``key`` (made now if new; ``spawn``
    starts one of its workers) back to its size, in the background."""
    if _settings.size == 0:
        return
    with _lock:
        pool = _pools.get(key)
        if pool is None:
            pool = _pools[key] = WorkerPool(spawn)
    _keeper.fill(pool)


def configure(size: int | None = None, idle_s: float | None = None) -> PoolSettings:
    """Change the pool's size (idle workers per configuration; 0 turns pooling off) or idle time;
    idle workers beyond the new size are stopped now. Returns the settings in force."""
    global _settings
    with _lock:
        new = _checked(
            _settings.size if size is None else size, _settings.idle_s if idle_s is None else idle_s
        )
        _settings = new
        _idle_changed.notify_all()
    _stop_expired()
    return new


def settings() -> PoolSettings:
    return _settings


def stats() -> dict[str, int]:
    """Idle workers and workers handed out, over every configuration."""
    with _lock:
        return {
            "configurations": len(_pools),
            "idle": sum(len(p._idle) for p in _pools.values()),
            "starting": sum(p._filling for p in _pools.values()),
            "taken": sum(p.taken for p in _pools.values()),
        }


def idle_pids() -> set[int]:
    """The process ids of the idle workers (a check that no worker outlived its run skips these)."""
    with _lock:
        return {w.pid for p in _pools.values() for _, w in p._idle if w.pid is not None}


def wait_idle(count: int, timeout: float, key: Hashable | None = None) -> bool:
    """Wait until ``count`` workers are idle (in the pool of ``key``, or over every pool): a warm-up,
    and tests' way to wait for a state instead of sleeping. False after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    with _lock:
        while _idle_now(key) < count:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            _idle_changed.wait(remaining)
    return True


def wait_refilled(timeout: float) -> bool:
    """Wait until no refill asked of the keeper is still to land (a start in flight holds its
    worker's pipes): the state a count of processes or descriptors must see. False after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    with _lock:
        while any(p._filling for p in _pools.values()):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            _idle_changed.wait(remaining)
    return True


def _idle_now(key: Hashable | None) -> int:
    if key is not None:
        return len(_pools[key]._idle) if key in _pools else 0
    return sum(len(p._idle) for p in _pools.values())


def _next_expiry_in() -> float | None:
    oldest = [p._idle[0][0] for p in _pools.values() if p._idle]
    return None if not oldest else max(min(oldest) + _settings.idle_s - time.monotonic(), 0.0) + 0.01


def _stop_expired() -> None:
    now = time.monotonic()
    with _lock:
        expired = [w for p in _pools.values() for w in p._pop_expired(now, _settings.size)]
    for worker in expired:
        worker.stop_nowait()


def close_all() -> None:
    """Stop every idle worker and refill no more (at exit). Spawns under way are waited for a
    little, so none lands after this and outlives the process unseen."""
    global _closed
    with _lock:
        _closed = True
        for pool in _keeper.asked:  # asked, not started: never will be
            pool._filling -= 1
        _keeper.asked.clear()
        deadline = time.monotonic() + EXIT_WAIT_S
        while any(p._filling for p in _pools.values()) and time.monotonic() < deadline:
            _idle_changed.wait(deadline - time.monotonic())
        idle = [w for p in _pools.values() for _, w in p._idle]
        for p in _pools.values():
            p._idle.clear()
    for worker in idle:
        worker.stop()


def _forget_after_fork() -> None:
    """In a forked child: the idle workers are the parent's (it stops them); the locks and the
    keeper thread did not come along, so they are made anew."""
    global _lock, _idle_changed, _keeper
    for pool in _pools.values():
        pool._forget()
    _pools.clear()
    _lock = threading.Lock()
    _idle_changed = threading.Condition(_lock)
    _keeper = _Keeper()


atexit.register(close_all)
os.register_at_fork(after_in_child=_forget_after_fork)

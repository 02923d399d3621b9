"""One call of a session, as the run loop sees it: where its REPL comes from (the session's live
worker, lent through ``run.hooks.CallHooks``' three lease methods), what it spends (its RLM's budget,
charged to the session's ``Spending`` too), the notes its task message gets, and its inputs'
descriptions (each big input hashed once per session, not per call)."""

from __future__ import annotations

import ast
import functools
import importlib.util
import os
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from rlmkit.budget import Budget, Spending
from rlmkit.concurrency.threads import in_thread
from rlmkit.errors import ConfigError
from rlmkit.run.describe import describe_inputs
from rlmkit.run.hooks import Described, Functions, Variables, start_lease
from rlmkit.sandbox import sandbox_backend
from rlmkit.sandbox.base import Sandbox
from rlmkit.sandbox.host import Relaunch, WorkerHost
from rlmkit.session import store
from rlmkit.settings import RunSettings
from rlmkit.trajectory import Compaction


class SessionState(Protocol):
    """What a call reads and keeps of its session (``rlmkit.Session`` is one). Named here rather
    than imported, so the session's module imports this one and not the other way round."""

    id: str
    spending: Spending
    sandbox: WorkerHost | None
    sent: dict[str, Any]  # Any: whatever object the worker holds for an input
    described: dict[str, tuple[Any, Any]]
    lost_at_restore: dict[str, str]
    launches: int
    checkpoint: store.Checkpoint

    def restore_into(self, host: Any) -> None: ...


MAX_VARIABLE_BYTES = 64 * 1024**2  # a bigger pickle is listed as unsaved: it stays live, uncheckpointed
RESTORED_NOTE = "its variables were put back as of the last finished call (a checkpoint)"


def worker_sandbox(name: str, interpreter_factory: object = None) -> Callable[..., WorkerHost]:
    """The class of the worker a session keeps alive between calls: ``ConfigError`` (the one
    place that says so) when ``name`` runs no worker or a DSPy interpreter runs the cells."""
    backend = sandbox_backend(name) if interpreter_factory is None else None
    if backend is None or not issubclass(backend, WorkerHost):
        shown = "a DSPy interpreter" if interpreter_factory is not None else repr(name)
        raise ConfigError(f"a session needs a worker sandbox such as 'process', not {shown}")
    return backend


def _find_cloudpickle() -> str | None:
    """The folder cloudpickle is installed in: the worker (no site-packages) imports it from there."""
    spec = importlib.util.find_spec("cloudpickle")
    if spec is None or not spec.origin:
        return None
    return os.path.dirname(os.path.dirname(spec.origin))


PICKLER_DIR = _find_cloudpickle()


@functools.lru_cache(maxsize=32)
def prelude_names(prelude: str) -> frozenset[str]:
    """Top-level names the prelude defines (SHOW_VARS, FINAL_VAR, imports ...): not model variables."""
    names: set[str] = set()
    for node in ast.parse(prelude).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return frozenset(names)


class SessionCall:
    """The session's side of one run (``run.start.run_tree(hooks=...)``): a ``CallHooks``."""

    def __init__(
        self,
        session: SessionState,
        *,
        number: int,
        restored: str | None,
        lost: dict[str, str],
        notes: str,
        asked: tuple[str, ...] = (),
        compaction: Compaction | None = None,
    ):
        self.session = session
        self.notes = notes
        self.asked = asked  # the inputs given to this call (not at open): last in its task message
        self.meta: dict[str, Any] = {
            "id": session.id,
            "call": number,
            "restored": restored,
            "lost": dict(lost),
        }
        self.compaction = compaction  # what ``notes`` summarised or left out to fit the window
        self.skip: set[str] = set()  # inputs, host functions, prelude names: not the model's variables
        self._launches_seen = session.launches

    # -- what run_tree asks ------------------------------------------------------------
    def spending(self, per_call: Budget) -> Spending:
        """The call's counters against its RLM's budget; each charge also goes to the session's."""
        return per_call.spending(within=self.session.spending)

    def describe_inputs(self, variables: Mapping[str, object]) -> Described:
        cache = self.session.described
        fresh = {name: value for name, value in variables.items() if cache.get(name, (None,))[0] is not value}
        infos, finish = describe_inputs(fresh)
        for info in infos:
            cache[info.name] = (fresh[info.name], info)
        return [cache[name][1] for name in variables], finish

    # -- the lease (CallHooks.sandbox / start / release) ----------------------------------
    def sandbox(self, settings: RunSettings, spending: Spending) -> Sandbox:
        session = self.session
        sandbox: WorkerHost | None = session.sandbox
        if sandbox is None:  # the first call: a worker that gets the checkpoint back at each launch
            backend = worker_sandbox(settings.sandbox)
            relaunch = Relaunch(session.restore_into, RESTORED_NOTE)
            sandbox = session.sandbox = backend(settings.sandbox_limits(spending), relaunch=relaunch)
        sandbox.limits = settings.sandbox_limits(spending)
        return sandbox

    async def start(self, name: str, sandbox: WorkerHost, variables: Variables,
                    functions: Functions, prelude: str) -> None:  # fmt: skip
        self.skip = {*variables, *functions, *prelude_names(prelude)}
        launching = not sandbox.alive()
        start = functools.partial(in_thread, self._start, sandbox, variables, functions, prelude, launching)
        await start_lease(name, sandbox, start, launches=launching)
        self._note_restores()

    def _start(self, sandbox: WorkerHost, variables: Variables, functions: Functions,
               prelude: str, launching: bool) -> None:  # fmt: skip
        session = self.session
        if launching:
            sandbox.close()  # a dead or idle-stopped worker's leftovers
            sandbox.start(variables, functions, prelude)  # its relaunch puts the checkpoint back
        else:
            changed = {n: v for n, v in variables.items() if not _same(session.sent.get(n, _NOTHING), v)}
            if sandbox.update(changed, functions, prelude):  # it died just before: rebuilt now
                self.meta["restored"] = "worker_died"
        session.sent = dict(variables)

    async def release(self, sandbox: WorkerHost) -> None:
        """The worker stays: the session checkpoints it once the run is over."""
        self._note_restores()  # a cell that crashed the worker: it came back from the checkpoint

    def _note_restores(self) -> None:
        """What any worker launched during this call could not get back, for the caller (the
        trajectory); the model reads it in the task message or the crashed cell's output."""
        if self.session.launches != self._launches_seen:
            self._launches_seen = self.session.launches
            self.meta["lost"].update(self.session.lost_at_restore)


_NOTHING = object()


def _same(held: object, given: object) -> bool:
    """The worker holds this value already: the same object, or equal text or number (a str
    compares at memory speed, far below what crossing again costs)."""
    if held is given:
        return True
    scalar = (str, bytes, int, float, bool)
    return type(held) is type(given) and isinstance(given, scalar) and held == given


def checkpoint_now(session: SessionState, skip: set[str]) -> list[str]:
    """Ask the live worker for what changed and keep it (blocking: run it on a thread)."""
    sandbox = session.sandbox
    if sandbox is None or not sandbox.alive():
        return []
    reply = sandbox.exchange(("snapshot", sorted(skip), PICKLER_DIR, MAX_VARIABLE_BYTES))
    return session.checkpoint.apply(reply)


__all__ = [
    "MAX_VARIABLE_BYTES",
    "PICKLER_DIR",
    "SessionCall",
    "checkpoint_now",
    "prelude_names",
    "worker_sandbox",
]

"""What a call's caller decides about its run, as one typed object the run reads.

A run needs a REPL and a few things only its caller knows. ``CallHooks`` names them all:

- the lease of its REPL: ``sandbox`` (the worker, not started yet), ``start`` (its inputs,
  host functions and prelude go in) and ``release`` (the run is over);
- ``spending``: the counters the call tree charges, against the call's budget;
- ``describe_inputs``: how the task message describes the inputs (and hashes the big ones);
- ``notes``, ``asked`` and ``meta``: what the task message says before the inputs, which inputs
  were given at this call (listed last), and the record the trajectory keeps of the caller;
  ``compaction``: what the caller left out of ``notes`` to fit the model's window, if anything.

A plain call (``PlainCall``) starts a worker of its own (pooled, or one that runs its cells in a
DSPy interpreter) and closes it at the end. A session call (``rlmkit.session.call.SessionCall``)
lends the session's live worker, cuts the budget to what the session has left, and adds its
history. The run loop reads only these hooks, so it has no branch for either.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol, runtime_checkable

from rlmkit import events as ev
from rlmkit.budget import Budget, Spending
from rlmkit.errors import SandboxError
from rlmkit.run.describe import describe_inputs
from rlmkit.sandbox import make_sandbox
from rlmkit.sandbox.base import HostFunction, Sandbox, SandboxLimits
from rlmkit.settings import RunSettings
from rlmkit.trajectory import Compaction, VariableInfo

# What ``describe_inputs`` gives back: each input's record, and the hashing left to do (or None)
Described = tuple[list[VariableInfo], Callable[[], None] | None]
Launch = Callable[[SandboxLimits], Sandbox]  # a sandbox of a run's limits, e.g. a DSPy interpreter's
Variables = dict[str, object]  # the REPL's inputs by name, as the worker gets them
Functions = dict[str, HostFunction]  # the REPL's host functions by name


@runtime_checkable
class CallHooks(Protocol):
    notes: str  # before the task message's inputs (a session: its history, variables, restores)
    asked: tuple[str, ...]  # inputs given at this call, not before: listed last
    meta: dict[str, object]  # the trajectory's record of the caller (a session's id, call, restores)
    compaction: Compaction | None  # what the notes summarised or left out (a long session)

    def spending(self, budget: Budget) -> Spending: ...

    def describe_inputs(self, variables: Mapping[str, object]) -> Described: ...

    def sandbox(self, settings: RunSettings, spending: Spending) -> Sandbox: ...

    async def start(
        self, name: str, sandbox: Sandbox, variables: Variables, functions: Functions, prelude: str
    ) -> None: ...

    async def release(self, sandbox: Sandbox) -> None: ...


class PlainCall:
    """A call on its own: a fresh worker (``launch(limits)``, or the settings' sandbox backend),
    closed at the end; the whole budget; every input described anew."""

    notes = ""
    asked: tuple[str, ...] = ()
    compaction: Compaction | None = None

    def __init__(self, launch: Launch | None = None):
        self.launch = launch  # a DSPy interpreter's launcher, say; None: the settings' backend
        self.meta: dict[str, object] = {}

    def spending(self, budget: Budget) -> Spending:
        return budget.spending()

    def describe_inputs(self, variables: Mapping[str, object]) -> Described:
        return describe_inputs(variables)

    def sandbox(self, settings: RunSettings, spending: Spending) -> Sandbox:
        limits = settings.sandbox_limits(spending)
        return self.launch(limits) if self.launch is not None else make_sandbox(settings.sandbox, limits)

    async def start(
        self, name: str, sandbox: Sandbox, variables: Variables, functions: Functions, prelude: str
    ) -> None:
        await start_lease(name, sandbox, lambda: sandbox.astart(variables, functions, prelude))

    async def release(self, sandbox: Sandbox) -> None:
        ev.emit(ev.SandboxClosing(sandbox))
        await sandbox.aclose_nowait()
        ev.emit(ev.SandboxClosed(sandbox))


async def start_lease(
    name: str, sandbox: Sandbox, start: Callable[[], Awaitable[None]], *, launches: bool = True
) -> None:
    """Run a lease's ``start``: a start that launches a worker is announced (``SandboxStarting``,
    then ``SandboxStarted``), and a failure says which sandbox failed (a ``SandboxError`` raised
    inside already says what failed, a DSPy interpreter factory's say, and passes as it is)."""
    if launches:
        ev.emit(ev.SandboxStarting(sandbox))
    try:
        await start()
    except SandboxError:
        raise
    except Exception as exc:
        raise SandboxError(f"sandbox {name!r} failed to start: {exc}") from exc
    if launches:
        ev.emit(ev.SandboxStarted(sandbox))


__all__ = ["CallHooks", "Described", "Functions", "Launch", "PlainCall", "Variables", "start_lease"]

"""``rlmkit.Session``: many calls of one RLM over inputs loaded once, in one live REPL.

    with rlm.session(context=big_text) as s:
        p1 = s(question="How many requests failed?")
        p2 = await s.acall(question="Which hosts caused most of them?")
        s.variables                     # {name: "dict, 12 items"}
        s.save("sessions/incident-42")
    s2 = rlmkit.Session.load("sessions/incident-42", rlm)

Each call is an ordinary run of ``run.start.run_tree`` (the same loop), lent the session's worker, and
returns what a plain call returns (``RLM.prediction``: the same fields, the same DSPy trace entry).
Inputs cross into it once; an input given again crosses only if it is another object. After
each call the worker pickles what changed (``sandbox/worker_side/snapshot.py``) and the session keeps the
bytes (and writes them to its directory, when it has one): a worker that dies or is stopped
while idle comes back with them at the next call, which says so in its trajectory.

One call at a time: a call made while another runs raises ``SessionBusyError`` at once (it
never queues behind it; nothing is sent).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import dspy

import rlmkit
from rlmkit.budget import Budget
from rlmkit.concurrency.sync_loop import run_sync, shared_loop
from rlmkit.concurrency.threads import in_thread
from rlmkit.errors import BudgetExceeded, ConfigError, MissingInputError, SessionBusyError, SessionClosedError
from rlmkit.models.lm_cache import current_rollout_id
from rlmkit.observe.streaming import remember_caller_loop, stream_run
from rlmkit.prompting import session_notes
from rlmkit.run.inputs import load_input
from rlmkit.run.start import run_tree
from rlmkit.sandbox import make_sandbox
from rlmkit.sandbox.host import WorkerHost
from rlmkit.session import store
from rlmkit.session.call import PICKLER_DIR, SessionCall, checkpoint_now
from rlmkit.signature import signature_text
from rlmkit.trajectory import bounded

RESTORE_TIMEOUT_S = 300.0  # unpickling a large checkpoint in a fresh worker


class Session:
    """Calls of ``rlm`` over ``inputs`` (given once), with the REPL kept between them.

    ``history_calls`` / ``history_chars``: how many earlier calls (question and answer) the next
    prompt shows, and at most how many characters of them. ``budget``: limits on the whole
    session (calls, tokens, cost, and seconds spent in calls); each call also keeps the RLM's own.
    ``idle_timeout``: seconds without a call after which the worker is stopped (the next call
    rebuilds it from the checkpoint). ``path``: a directory the session checkpoints into after
    every call (without one the checkpoint lives in this process only)."""

    def __init__(
        self,
        rlm: Any,
        *,
        history_calls: int = 5,
        history_chars: int = 4000,
        budget: Budget | None = None,
        idle_timeout: float | None = None,
        path: str | Path | None = None,
        **inputs: Any,
    ):
        if getattr(rlm, "interpreter_factory", None) is not None:
            raise ConfigError("a session needs a worker sandbox such as 'process', not a DSPy interpreter")
        if not isinstance(make_sandbox(rlm.sandbox_name), WorkerHost):  # unstarted: nothing launches
            raise ConfigError(f"a session needs a worker sandbox such as 'process', not {rlm.sandbox_name!r}")
        self.rlm = rlm
        self.id = uuid.uuid4().hex
        self.history_calls, self.history_chars = history_calls, history_chars
        self.budget = budget or Budget()
        self.spent = {"calls": 0, "tokens": 0, "cost": 0.0, "seconds": 0.0}
        self.idle_timeout = idle_timeout
        self.history: list[tuple[dict[str, Any], dict[str, Any]]] = []
        self.calls = 0
        self.inputs = self._check_inputs(inputs)
        self.checkpoint = store.Checkpoint()
        self.sandbox: Any = None  # the session's WorkerHost, made at the first call
        self.sent: dict[str, Any] = {}  # name -> the object the worker holds (what needs no resend)
        self.described: dict[str, tuple[Any, Any]] = {}  # name -> (value, VariableInfo): hashed once
        self.lost_at_restore: dict[str, str] = {}  # name -> "type: why", of the last restore
        self.launches = 0  # workers started so far (first start, rebuilds, restarts after a crash)
        self.checkpoint_error: str | None = None
        self.directory = Path(path) if path is not None else None
        self._written: dict[str, Any] = {}  # input name -> the text already in the directory
        self._pending_restore: str | None = None  # why the next call's REPL is rebuilt, if it is
        self._busy = threading.Lock()
        # Taking _busy and saying why it is held happen under _gate, so a call can tell the idle
        # stop (a brief close it waits out) from another call (which it refuses at once).
        self._gate = threading.Lock()
        self._idle_stopping = False
        self._idle: threading.Timer | None = None
        self.closed = False

    # -- inputs ------------------------------------------------------------------------
    def _history_fields(self) -> list[str]:
        fields = self.rlm.signature.input_fields
        return [name for name, f in fields.items() if f.annotation is dspy.History]

    def _check_inputs(self, inputs: dict[str, Any]) -> dict[str, Any]:
        known = self.rlm.signature.input_fields
        unknown = [name for name in inputs if name not in known]
        if unknown:
            raise MissingInputError(f"unexpected input(s) {unknown}; the signature takes {list(known)}")
        return {name: load_input(name, value) for name, value in inputs.items()}

    @property
    def variables(self) -> dict[str, str]:
        """The model's live REPL variables as of the last call: name -> "type, size"."""
        return {name: var.describe() for name, var in self.checkpoint.variables.items()}

    # -- budget ------------------------------------------------------------------------
    def budget_left(self) -> dict[str, float | None]:
        return {
            name: None if limit is None else limit - self.spent[name.removeprefix("max_")]
            for name, limit in self.budget.limits().items()
        }

    def check_budget(self) -> None:
        for name, left in self.budget_left().items():
            if left is not None and left <= 0:
                kind, limit = name.removeprefix("max_"), getattr(self.budget, name)
                raise BudgetExceeded(
                    f"session budget exceeded: {kind} used {self.spent[kind]} of {limit}",
                    kind=kind, limit=limit, used=self.spent[kind],
                )  # fmt: skip

    # -- calls -------------------------------------------------------------------------
    def __call__(self, **inputs: Any) -> dspy.Prediction:
        """A call from sync code. Ctrl-C (KeyboardInterrupt) stops this call, not the session:
        the next call rebuilds the REPL from the checkpoint before it."""
        inputs.setdefault("_rollout_id", current_rollout_id.get())
        loop = shared_loop()
        if _running_loop() is loop:  # called from a sync callback on that loop: it cannot wait on itself
            return run_sync(self.acall(**inputs))
        with remember_caller_loop():
            future = asyncio.run_coroutine_threadsafe(self.acall(**inputs), loop)
            try:
                return future.result()
            except KeyboardInterrupt:
                future.cancel()
                try:
                    future.result(timeout=30)
                except BaseException:  # noqa: BLE001, S110 - its CancelledError: the call is over
                    pass
                raise

    async def acall(self, **inputs: Any) -> dspy.Prediction:
        task = inputs.pop("_task", None)
        rollout_id = inputs.pop("_rollout_id", None)
        rollout_id = current_rollout_id.get() if rollout_id is None else rollout_id
        if self.closed:
            raise SessionClosedError("this session is closed")
        if not self._take_turn():
            await in_thread(self._busy.acquire)  # the idle stop is closing the worker: wait it out
        try:
            self._cancel_idle()
            self.check_budget()
            given = self._check_inputs(inputs)
            merged = {**self.inputs, **given}
            history_fields = self._history_fields()
            for name in history_fields:
                if name not in given:
                    merged[name] = dspy.History(messages=[{**i, **o} for i, o in self.history])
            missing = [name for name in self.rlm.signature.input_fields if name not in merged]
            if missing:  # before the call counts, before any model request
                raise MissingInputError(f"missing input(s) {missing}: give them at open or at this call")
            call = self._begin_call(show_history=not history_fields, asked=tuple(given))
            run = self._run(call, merged, given, history_fields, task, rollout_id)
            return await self.rlm.prediction(run, merged)  # the way out of a plain call, too
        finally:
            self._busy.release()
            self._arm_idle()

    async def _run(
        self,
        call: SessionCall,
        merged: dict[str, Any],
        given: dict[str, Any],
        history_fields: list[str],
        task: dict[str, Any] | None,
        rollout_id: int | None,
    ) -> tuple[dict[str, Any], Any]:
        """One call's run in the session's worker, and what the session keeps of it (counts,
        spending, history, the checkpoint), whether it answered or not."""
        outputs: dict[str, Any] | None = None
        try:
            checked = self.rlm.check_inputs(merged)
            outputs, trajectory = await run_tree(
                self.rlm.run_spec(), checked, hooks=call, task=task, rollout_id=rollout_id
            )
        except asyncio.CancelledError:
            self._pending_restore = "interrupted"
            raise
        finally:
            self.calls += 1
            self.inputs = {k: v for k, v in merged.items() if k not in history_fields}
            self._spend(call)
            if outputs is not None:
                asked = {k: v for k, v in given.items() if k not in history_fields}
                self._remember(asked, outputs)
            await in_thread(self._checkpoint, call.skip)
        return outputs, trajectory

    def stream(self, **inputs: Any) -> AsyncIterator[Any]:
        """``async for item in s.stream(question=...)``: the call's ``rlmkit.events`` as they happen
        (each with the session's id), then the ``dspy.Prediction``."""
        return stream_run(self, inputs)

    def _begin_call(self, *, show_history: bool, asked: tuple[str, ...] = ()) -> SessionCall:
        restored, self._pending_restore = self._pending_restore, None
        if self.sandbox is not None and self.sandbox.alive():
            restored = None  # e.g. stopped while it waited for the model: the REPL is whole
        elif restored is None and self.sandbox is not None:
            restored = "worker_died"  # killed between calls (kill -9, out of memory)
        lost = self.checkpoint.unsaved() if restored else {}
        live = {name: desc for name, desc in self.variables.items() if name not in lost and desc != "module"}
        notes = session_notes(
            variables=live,
            history=self.history if show_history else [],
            restored=restored,
            lost=lost,
            limit=max(200, self.history_chars // max(1, 2 * self.history_calls)),
        )
        return SessionCall(
            self, number=self.calls + 1, restored=restored, lost=lost, notes=notes, asked=asked
        )

    def _spend(self, call: SessionCall) -> None:
        if call.run_spending is not None:
            for name, value in call.run_spending.used().items():
                self.spent[name] += value

    def _remember(self, asked: dict[str, Any], outputs: dict[str, Any]) -> None:
        """Keep this call's question and answer for the next prompts, within the bounds (a long
        value, say a new context passed at call time, is kept as its head and tail)."""
        cut = max(200, self.history_chars // 2)
        self.history.append(tuple(_jsonable(values, cut) for values in (asked, outputs)))
        del self.history[: max(0, len(self.history) - self.history_calls)]
        while len(self.history) > 1 and len(json.dumps(self.history, default=str)) > self.history_chars:
            del self.history[0]

    # -- checkpoints -------------------------------------------------------------------
    def _checkpoint(self, skip: set[str]) -> None:
        try:
            checkpoint_now(self, skip)
            self.checkpoint_error = None
        except Exception as exc:  # noqa: BLE001 - the call's answer stands; the last checkpoint stays
            self.checkpoint_error = f"{type(exc).__name__}: {exc}"
        if self.directory is not None:
            self._write(self.directory)

    def restore_into(self, host: Any) -> None:
        """``WorkerHost.on_launch``: a new worker (first start, restart, rebuild) gets the checkpoint.
        What it cannot bring back (never pickled, or failing to unpickle) is ``lost_at_restore``."""
        self.launches += 1
        lost = self.checkpoint.unsaved()
        blobs = self.checkpoint.blobs()
        if blobs:
            _, errors = host.exchange(("restore", PICKLER_DIR, blobs), RESTORE_TIMEOUT_S)
            lost.update({name: f"{self.checkpoint.variables[name].type}: {why}" for name, why in errors})
        for name in lost:
            self.checkpoint.variables.pop(name, None)  # gone with the old worker
        self.lost_at_restore = lost

    def save(self, directory: str | Path) -> Path:
        """Write the session (inputs once, the variables' pickles, history) to ``directory``, which
        it then checkpoints into after every call."""
        if not self._take_turn("cannot save while a call is running"):
            self._busy.acquire()
        try:
            directory = Path(directory)
            if directory != self.directory:
                self._written = {}
            self._write(directory)
            self.directory = directory
            return directory
        finally:
            self._busy.release()

    def _write(self, directory: Path) -> None:
        manifest = {
            "id": self.id,
            "signature": signature_text(self.rlm.signature),
            "saved": time.time(),
            "rlmkit_version": rlmkit.__version__,
            "calls": self.calls,
            "spent": self.spent,
            "history": [{"inputs": i, "outputs": o} for i, o in self.history],
        }
        store.write(directory, manifest, self.inputs, self.checkpoint, self._written)

    @classmethod
    def load(cls, directory: str | Path, rlm: Any, **options: Any) -> Session:
        """A session saved by ``save`` (any process), for ``rlm``: its first call starts a fresh
        worker with the inputs and the saved variables. ``SessionFileError`` names a bad file."""
        loaded = store.read(directory)
        session = cls(rlm, path=directory, **options, **loaded.inputs)
        doc = loaded.manifest
        session.id = doc.get("id", session.id)
        session.checkpoint = loaded.checkpoint
        session.history = [(h["inputs"], h["outputs"]) for h in doc.get("history", [])]
        session.calls = int(doc.get("calls", 0))
        session.spent.update(doc.get("spent", {}))
        session._written = {k: v for k, v in session.inputs.items() if isinstance(v, str)}
        session._pending_restore = "loaded"
        return session

    # -- lifetime ----------------------------------------------------------------------
    def _arm_idle(self) -> None:
        if self.idle_timeout is None or self.closed:
            return
        self._idle = threading.Timer(self.idle_timeout, self._stop_idle)
        self._idle.daemon = True
        self._idle.start()

    def _cancel_idle(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None

    def _take_turn(
        self, busy: str = "a session runs one call at a time; this one is still running another"
    ) -> bool:
        """Take the session's one turn: True when taken, False when the idle stop holds it (the
        caller waits for it), SessionBusyError when a call does."""
        with self._gate:
            if self._busy.acquire(blocking=False):
                return True
            if not self._idle_stopping:
                raise SessionBusyError(busy)
            return False

    def _stop_idle(self) -> None:
        with self._gate:
            if not self._busy.acquire(blocking=False):
                return  # a call began meanwhile
            self._idle_stopping = True
        try:
            if self.sandbox is not None and self.sandbox.alive():
                self.sandbox.close()
                self._pending_restore = "idle"
        finally:
            with self._gate:
                self._idle_stopping = False
                self._busy.release()

    @property
    def worker_running(self) -> bool:
        return self.sandbox is not None and self.sandbox.alive()

    def close(self) -> None:
        """Stop the worker (a saved directory stays). Idempotent."""
        self.closed = True
        self._cancel_idle()
        if self.sandbox is not None:
            self.sandbox.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await in_thread(self.close)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _jsonable(values: dict[str, Any], limit: int) -> dict[str, Any]:
    """JSON data (what a manifest can hold), each value's text bounded to ``limit`` characters."""
    plain = json.loads(json.dumps(values, default=str))
    return {k: v if len(json.dumps(v)) <= limit else bounded(json.dumps(v), limit) for k, v in plain.items()}

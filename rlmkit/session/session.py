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

``s.start(question=..., tools=[...])`` starts a call on a task of its own and returns its handle
(``rlmkit.session.runs.SessionRun``): a call that pauses when the model's code calls one of the
client's tools and goes on in the same live REPL when ``s.resume(call_id, output)`` gives the
result; that can run in the background, polled and cancelled between turns.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import dspy

import rlmkit
from rlmkit.budget import Budget, Spending
from rlmkit.concurrency.threads import in_thread
from rlmkit.errors import SessionBusyError, SessionClosedError, UserError
from rlmkit.model_choice import window_tokens_of
from rlmkit.observe.streaming import stream_run
from rlmkit.run.client_tools import DEFAULT_RESULT_TIMEOUT_S, ClientTool, PendingToolCall, RunControl
from rlmkit.run.entry import CallOptions, call_sync
from rlmkit.run.inputs import RunInputs, check_known, load_input
from rlmkit.run.spec import RunSpec
from rlmkit.run.start import run_tree
from rlmkit.session import compaction, store
from rlmkit.session.call import PICKLER_DIR, SessionCall, checkpoint_now, worker_sandbox
from rlmkit.session.runs import RunSlots, SessionRun
from rlmkit.signature import signature_text
from rlmkit.trajectory import bounded

RESTORE_TIMEOUT_S = 300.0
CALL_ID = re.compile(
    r"^call_([0-9a-f]{32})_[0-9a-f]{12}$"
)  # a started run's tool call: its session  # unpickling a large checkpoint in a fresh worker


class Session:
    """Calls of ``rlm`` over ``inputs`` (given once), with the REPL kept between them.

    ``history_calls`` / ``history_chars``: how many earlier calls (question and answer) the next
    prompt shows, and at most how many characters of them. ``compact_at``: the share of the root
    model's window (``window_tokens``, else the model's own when known) a call's task message may
    take; past it, earlier calls are summarised and old variables unlisted, every one kept in the
    REPL (``rlmkit.session.compaction``). ``budget``: limits on the whole
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
        window_tokens: int | None = None,
        compact_at: float = compaction.DEFAULT_COMPACT_AT,
        budget: Budget | None = None,
        idle_timeout: float | None = None,
        path: str | Path | None = None,
        **inputs: Any,
    ):
        worker_sandbox(rlm.sandbox_name, getattr(rlm, "interpreter_factory", None))  # nothing launches
        self.rlm = rlm
        self.id = uuid.uuid4().hex
        self.history_calls, self.history_chars = history_calls, history_chars
        if window_tokens is not None and (not isinstance(window_tokens, int) or window_tokens < 256):
            raise UserError(f"window_tokens must be an int >= 256, got {window_tokens!r}")
        self.window_tokens, self.compact_at = window_tokens, compaction.check_share(compact_at)
        self.budget = budget or Budget()
        # what the session has spent: each call's tree charges it beside its own RLM's budget, and
        # its clock runs only during calls (``max_seconds``: seconds spent in calls)
        self.spending = Spending(self.budget, name="session budget")
        self.idle_timeout = idle_timeout
        self.history: list[tuple[dict[str, Any], dict[str, Any]]] = []
        self.history_numbers: list[int] = []  # the session call each history entry comes from
        self.calls = 0
        self.compacted_through = 0  # calls up to this one are shown summarised (``compact``)
        self.inputs = self._load_inputs(inputs)
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
        self.run: SessionRun | None = None  # the last started run (``start``), over or not

    # -- inputs ------------------------------------------------------------------------
    def _history_fields(self) -> list[str]:
        fields = self.rlm.signature.input_fields
        return [name for name, f in fields.items() if f.annotation is dspy.History]

    def _load_inputs(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """Inputs given at open or at a call: each one the signature's; the rest may come later."""
        check_known(self.rlm.signature, inputs)
        return {name: load_input(name, value) for name, value in inputs.items()}

    @property
    def variables(self) -> dict[str, str]:
        """The model's live REPL variables as of the last call: name -> "type, size"."""
        return {name: var.describe() for name, var in self.checkpoint.variables.items()}

    @property
    def spent(self) -> dict[str, float]:
        """What the session has spent so far: calls, tokens, cost, and seconds spent in calls."""
        return self.spending.used()

    # -- calls -------------------------------------------------------------------------
    def __call__(self, **inputs: Any) -> dspy.Prediction:
        """A call from sync code, through the bridge ``RLM.__call__`` uses. Ctrl-C
        (KeyboardInterrupt) stops this call, not the session: the next call rebuilds the REPL
        from the checkpoint before it."""
        return call_sync(self.acall, **inputs)

    async def acall(self, **inputs: Any) -> dspy.Prediction:
        if self.run is not None and not self.run.done:
            raise SessionBusyError("a session runs one call at a time; a started run is not over")
        return await self._call(inputs, None)

    def start(
        self,
        *,
        tools: Sequence[ClientTool | Mapping[str, Any]] = (),
        tool_result_timeout: float = DEFAULT_RESULT_TIMEOUT_S,
        slots: RunSlots | None = None,
        **inputs: Any,
    ) -> SessionRun:
        """Start a call that lives on its own task, and return its handle (``SessionRun``): it
        pauses at each call of a client tool (``tools``: OpenAI function definitions, which become
        REPL functions) until ``resume``, can be cancelled between turns, and goes on when nobody
        awaits it. ``slots``: a limit it shares with other runs (it stays ``queued`` until one is
        free). Call it from a coroutine: the run goes on that loop. A bad tool is a ``ConfigError``
        here, before anything runs."""
        if self.closed:
            raise SessionClosedError("this session is closed")
        if self.run is not None and not self.run.done:
            raise SessionBusyError("a session runs one call at a time; a started run is not over")
        control = RunControl(tools, result_timeout_s=tool_result_timeout, call_prefix=f"{self.id}_")
        self.run = SessionRun(lambda: self._call(dict(inputs), control), control, slots)
        return self.run

    @staticmethod
    def of_call(call_id: str) -> str | None:
        """The id of the session whose started run made tool call ``call_id`` (None: no session's)."""
        found = CALL_ID.match(call_id)
        return found.group(1) if found else None

    async def resume(self, call_id: str, output: Any) -> dspy.Prediction | PendingToolCall:
        """The client's result of the started run's tool call ``call_id``; then, as
        ``SessionRun.next``, the run's answer or its next tool call."""
        if self.run is None:
            raise UserError("this session has no started run to resume")
        return await self.run.resume(call_id, output)

    async def _call(self, inputs: dict[str, Any], control: RunControl | None) -> dspy.Prediction:
        options = CallOptions.pop(inputs)
        if self.closed:
            raise SessionClosedError("this session is closed")
        if not self._take_turn():
            await in_thread(self._busy.acquire)  # the idle stop is closing the worker: wait it out
        try:
            self._cancel_idle()
            self.spending.check()  # the session's own budget, before any model request
            given = self._load_inputs(inputs)  # each input loaded once: the run takes them as they are
            merged = {**self.inputs, **given}
            history_fields = self._history_fields()
            for name in history_fields:
                if name not in given:
                    merged[name] = dspy.History(messages=[{**i, **o} for i, o in self.history])
            made = {name: load_input(name, merged[name]) for name in history_fields if name not in given}
            loaded = {**merged, **made}
            # before the call counts, before any model request
            checked = RunInputs.check(self.rlm.signature, loaded, self.rlm.settings.display, loaded=True)
            spec = self.rlm.run_spec().resolved()  # once: the task message and the run read the same
            call = self._begin_call(spec, checked, show_history=not history_fields, asked=tuple(given))
            run = self._run(spec, call, checked, given, history_fields, options, control)
            return await self.rlm.prediction(run, merged)  # the way out of a plain call, too
        finally:
            self._busy.release()
            self._arm_idle()

    async def _run(
        self,
        spec: RunSpec,
        call: SessionCall,
        checked: RunInputs,
        given: dict[str, Any],
        history_fields: list[str],
        options: CallOptions,
        control: RunControl | None = None,
    ) -> tuple[dict[str, Any], Any]:
        """One call's run in the session's worker, and what the session keeps of it (counts,
        history, the checkpoint), whether it answered or not. Its tree charges the session's
        spending as it goes; the session's clock runs while it does."""
        outputs: dict[str, Any] | None = None
        self.spending.start()
        try:
            outputs, trajectory = await run_tree(
                spec,
                checked,
                hooks=call,
                task=options.task,
                rollout_id=options.rollout_id,
                control=control,
            )
        except asyncio.CancelledError:
            self._pending_restore = "interrupted"
            raise
        finally:
            self.spending.stop()
            self.calls += 1
            self.inputs = {k: v for k, v in checked.values.items() if k not in history_fields}
            if outputs is not None:
                asked = {k: v for k, v in given.items() if k not in history_fields}
                self._remember(asked, outputs, call.meta["call"])
            await in_thread(self._checkpoint, call.skip)
        return outputs, trajectory

    def stream(self, **inputs: Any) -> AsyncIterator[Any]:
        """``async for item in s.stream(question=...)``: the call's ``rlmkit.events`` as they happen
        (each with the session's id), then the ``dspy.Prediction``."""
        return stream_run(self, inputs)

    def _begin_call(
        self, spec: RunSpec, checked: RunInputs, *, show_history: bool, asked: tuple[str, ...] = ()
    ) -> SessionCall:
        restored, self._pending_restore = self._pending_restore, None
        if self.sandbox is not None and self.sandbox.alive():
            restored = None  # e.g. stopped while it waited for the model: the REPL is whole
        elif restored is None and self.sandbox is not None:
            restored = "worker_died"  # killed between calls (kill -9, out of memory)
        lost = self.checkpoint.unsaved() if restored else {}
        live = {name: desc for name, desc in self.variables.items() if name not in lost and desc != "module"}
        history = self.history if show_history else []
        draft = compaction.Draft(
            variables=live,
            history=history,
            numbers=self.history_numbers[len(self.history_numbers) - len(history) :],
            restored=restored,
            lost=lost,
            value_chars=max(200, self.history_chars // max(1, 2 * self.history_calls)),
            inputs=checked,
            asked=asked,
            signature=spec.signature,
            settings=spec.settings,  # a preset's knobs (turns, display) shape the message too
        )
        window = self.window_tokens or window_tokens_of(spec.lm)
        summarised = sum(1 for number in draft.numbers if number <= self.compacted_through)
        notes, compacted = compaction.compact(draft, window, self.compact_at, summarised)
        return SessionCall(
            self,
            number=self.calls + 1,
            restored=restored,
            lost=lost,
            notes=notes,
            asked=asked,
            compaction=compacted,
        )

    def compact(self) -> int:
        """Show every call so far as one short line in the next calls' task messages, whatever
        the window (the compaction a call makes on its own when its message would not fit, made
        now); every REPL variable stays. The number of calls now shown summarised."""
        if self.closed:
            raise SessionClosedError("this session is closed")
        self.compacted_through = self.calls
        return len([number for number in self.history_numbers if number <= self.calls])

    def _remember(self, asked: dict[str, Any], outputs: dict[str, Any], number: int) -> None:
        """Keep this call's question and answer for the next prompts, within the bounds (a long
        value, say a new context passed at call time, is kept as its head and tail)."""
        cut = max(200, self.history_chars // 2)
        self.history.append(tuple(_jsonable(values, cut) for values in (asked, outputs)))
        self.history_numbers.append(number)
        drop = max(0, len(self.history) - self.history_calls)
        while (
            len(self.history) - drop > 1
            and len(json.dumps(self.history[drop:], default=str)) > self.history_chars
        ):
            drop += 1
        del self.history[:drop], self.history_numbers[:drop]

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
        """``WorkerHost.relaunch.restore``: a new worker (first start, restart, rebuild) gets the checkpoint.
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
            "history": [
                {"call": n, "inputs": i, "outputs": o}
                for n, (i, o) in zip(self.history_numbers, self.history)
            ],
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
        session.history_numbers = [h.get("call", n) for n, h in enumerate(doc.get("history", []), 1)]
        session.calls = int(doc.get("calls", 0))
        session.spending.resume(doc.get("spent", {}))
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


def _jsonable(values: dict[str, Any], limit: int) -> dict[str, Any]:
    """JSON data (what a manifest can hold), each value's text bounded to ``limit`` characters."""
    plain = json.loads(json.dumps(values, default=str))
    return {k: v if len(json.dumps(v)) <= limit else bounded(json.dumps(v), limit) for k, v in plain.items()}

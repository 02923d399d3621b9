"""Host side: the host's half of the worker conversation, written once for every launcher.

A launcher (``Launcher``) starts ``worker_side/worker.py`` somewhere (a confined local process, a
container, another machine) and hands back a ``WorkerHandle``: its pipe (``wire.Channel``) and
how to interrupt, describe and stop it. ``WorkerHost`` does everything else: the start
handshake, sending the run's variables once, dispatching host-function calls, the cell
timeout (code time only: time inside host functions does not count), interrupting a cell
that runs too long (variables kept), restarting a worker that died or hung (variables reset
to the inputs), and reading values back. A new backend is a launcher and a registry line.
A run drives a cell from its event loop (``arun_then``: a reader on the pipe, host coroutines
awaited in place); ``run`` drives the same conversation from a blocking thread.

A host function ends the run by raising a ``RunError`` (e.g. ``BudgetExceeded``): the cell
is stopped at once and ``run()`` raises that error on the host.
"""

from __future__ import annotations

import pickle
import threading
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

from rlmkit.concurrency.threads import in_thread
from rlmkit.errors import ContextError, Finish, RunError, SandboxError
from rlmkit.sandbox import loop_io
from rlmkit.sandbox.base import CellResult, HostFunction, Sandbox, SandboxLimits, check_names
from rlmkit.sandbox.launcher import Launcher, WorkerHandle
from rlmkit.sandbox.worker_side import wire

START_TIMEOUT_S = 30.0
GET_TIMEOUT_S = 60.0
MAX_VALUE_BYTES = 256 * 1024**2  # largest pickled value get() accepts from the worker
RECV, CALL, DEATH, DONE = "recv", "call", "death", "done"  # a cell's conversation's steps (_drive)
# ``astart`` writes inputs up to this size from the event loop (about 2 ms of writing); bigger ones
# are written from a thread, so the loop is never held up while the first request goes out
LOOP_START_MAX_CHARS = 4_000_000


def max_frame(limits: SandboxLimits) -> int:
    """What a worker may send in one frame (a cell's output, a value for get()): bounded, so model
    code writing to the pipe itself cannot make the host allocate without limit."""
    return max(MAX_VALUE_BYTES, 8 * limits.max_output_chars + (1 << 20))


class _RunEnded(Exception):  # noqa: N818 - a carrier, never seen outside this module
    """A host function ended the run (a ``RunError``, or an interrupt of the host) and the cell then
    ran to its end: the worker is in a sane state, so it is kept (its variables with it)."""

    def __init__(self, error: BaseException):
        super().__init__(str(error))
        self.error = error


@dataclass(frozen=True)
class Relaunch:
    """What a host does after each (re)launch of its worker. ``restore(host)`` runs once the
    inputs and the prelude are in (a session puts its last checkpoint back; it may block, so such
    a start runs on a thread); ``note`` is what a restart tells the model about its variables."""

    restore: Callable[[WorkerHost], None] | None = None
    note: str = "its variables were reset to the inputs"


class WorkerHost(Sandbox):
    """A sandbox whose namespace lives in a worker that ``launcher`` starts; ``relaunch``: what
    follows each launch (a session's restore), fixed when the host is built."""

    def __init__(self, limits: SandboxLimits | None, launcher: Launcher, *, relaunch: Relaunch = Relaunch()):
        super().__init__(limits)
        self.launcher = launcher
        self.relaunch = relaunch
        self._lock = threading.RLock()  # re-entrant: a host function may call get() mid-cell
        self._running = False
        self._in_prelude = False
        self._worker: WorkerHandle | None = None
        self._chan: wire.Channel | None = None
        self._variables: dict[str, Any] = {}
        self._functions: dict[str, HostFunction] = {}
        self._prelude = ""
        self._protections: dict[str, bool | str] = {}
        self.startup_s = 0.0  # seconds the last (re)start took, variables included

    @property
    def protections(self) -> dict[str, bool]:
        """Which protections are active in the current worker (reasons in ``protection_notes``)."""
        return {name: value is True for name, value in self._protections.items()}

    @property
    def protection_notes(self) -> dict[str, bool | str]:
        return dict(self._protections)

    @property
    def pid(self) -> int | None:
        return self._worker.pid if self._worker else None

    @property
    def workdir(self) -> str | None:
        return self._worker.workdir if self._worker else None

    # ------------------------------------------------------------ lifecycle
    def start(self, variables: dict[str, Any], functions: dict[str, HostFunction], prelude: str = "") -> None:
        check_names(variables, functions)
        with self._lock:
            self.close()
            self._variables, self._functions, self._prelude = dict(variables), dict(functions), prelude
            self._launch()

    def _launch(self) -> None:
        self._drive(self._starting(self.launcher.acquire(self.limits)))

    async def astart(
        self, variables: dict[str, Any], functions: dict[str, HostFunction], prelude: str = ""
    ) -> None:
        """``start`` from the run's event loop. With a pooled worker and inputs small enough to write
        at once, the inputs and the prelude go out here in one burst and the worker takes them in
        while the first model request is out; the loop then waits on the pipe, with no thread and
        no hand-over of the GIL between. Otherwise (a new worker to start, big inputs to write) the
        start runs on a thread, as ``start``."""
        check_names(variables, functions)
        strings = [v for v in variables.values() if isinstance(v, str)]
        worker = None
        small = len(strings) == len(variables) and sum(map(len, strings)) <= LOOP_START_MAX_CHARS
        if small and self.relaunch.restore is None:  # a session's restore may block: on a thread
            worker = self.launcher.take(self.limits, refill=False)
        if worker is None:
            await in_thread(self.start, variables, functions, prelude)
            return
        try:
            with self._lock:
                self.close()
                self._variables, self._functions, self._prelude = dict(variables), dict(functions), prelude
                await self._adrive(self._starting(worker))
        finally:  # the replacement starts once this start is done, not competing with it for CPU
            self.launcher.prewarm(self.limits)

    def _starting(self, worker: WorkerHandle) -> Generator:
        """A worker's start, as a conversation (see ``_drive``): its ready message; the functions,
        the inputs and the prelude sent in one burst (the worker reads them in order); then its
        answers. The inputs cross once."""
        t0 = time.monotonic()
        self._worker, self._chan = worker, worker.channel
        try:
            msg = yield RECV, time.monotonic() + START_TIMEOUT_S
            if msg[0] != "ready":
                raise SandboxError(f"the REPL worker could not start: {msg[1]}")
            self._protections = msg[1]
            self._send_variables(self._variables)
            if self._prelude:
                self._chan.send(("run", self._prelude))
            self._check_loaded((yield RECV, time.monotonic() + START_TIMEOUT_S)[1])
            if self._prelude:
                self._in_prelude = True  # a worker dying here is not restarted (it would die again)
                try:
                    result = yield from self._cell(self._prelude, sent=True)
                finally:
                    self._in_prelude = False
                self._check_prelude(result)
            if self.relaunch.restore is not None:
                self.relaunch.restore(self)
        except (SandboxError, ContextError):
            self.close()
            raise
        except (wire.ChannelTimeout, EOFError, OSError) as exc:
            detail = worker.stderr_tail()
            self.close()
            raise SandboxError(f"the REPL worker could not start ({type(exc).__name__}): {detail}") from None
        self.startup_s = time.monotonic() - t0

    def _send_variables(self, variables: dict[str, Any]) -> None:
        """The host functions' docs and ``variables`` into the worker, then ``loaded``: the worker
        answers with what it could not rebuild (``_check_loaded``), after whatever follows."""
        chan = self._chan
        chan.send(("functions", {name: (fn.__doc__ or "") for name, fn in self._functions.items()}))
        sent: dict[int, str] = {}  # id -> first name: an input under two names crosses once
        for name, value in variables.items():
            if id(value) in sent:
                chan.send(("alias", name, sent[id(value)]))
                continue
            sent[id(value)] = name
            if isinstance(value, str):
                chan.send(("var_str", name))
                chan.send_text(value)
                continue
            chan.send(("var", name))
            try:
                chan.send_pickled(value)
            except (pickle.PicklingError, TypeError, AttributeError, RecursionError) as exc:
                raise ContextError(
                    f"variable {name!r} ({type(value).__name__}) cannot be sent into the sandbox: {exc}"
                ) from None
        chan.send(("loaded",))

    @staticmethod
    def _check_loaded(errors: list[str]) -> None:
        if errors:
            raise ContextError(
                "variables could not be rebuilt inside the sandbox (it has only the "
                "standard library): " + "; ".join(errors)
            )

    @staticmethod
    def _check_prelude(result: CellResult) -> None:
        if result.error or result.restarted:
            raise SandboxError(f"the sandbox prelude failed:\n{result.error}")

    def _run_prelude(self) -> None:
        if self._prelude:
            self._in_prelude = True  # a worker dying here is not restarted (it would die again)
            try:
                result = self._drive(self._cell(self._prelude))
            finally:
                self._in_prelude = False
            self._check_prelude(result)

    def update(self, variables: dict[str, Any], functions: dict[str, HostFunction], prelude: str) -> bool:
        """A live worker's next run (a session's next call): ``variables`` (only those that
        changed) cross, the host functions are the new run's, the prelude runs again. A restart
        from here on uses them too. True when the worker had died and a new one was launched."""
        check_names({**self._variables, **variables}, functions)
        with self._lock:
            self._variables.update(variables)
            self._functions, self._prelude = dict(functions), prelude
            if self._chan is not None:
                try:
                    self._send_variables(variables)
                    self._check_loaded(self._chan.recv_plain(time.monotonic() + START_TIMEOUT_S)[1])
                    self._run_prelude()
                    return False
                except (wire.ChannelTimeout, EOFError, OSError):
                    pass  # it died between runs: a fresh one gets everything
            self._restart()
            return True

    def alive(self) -> bool:
        """Whether the worker is started and has not exited (a kill -9 between runs shows here)."""
        worker = self._worker
        return worker is not None and worker.alive()

    def exchange(self, message: tuple, timeout_s: float = GET_TIMEOUT_S) -> Any:
        """Send one message between cells and return the worker's reply (plain data only).
        SandboxError, and no worker, when it does not answer."""
        with self._lock:
            if self._chan is None:
                raise SandboxError("the sandbox is not started (call start() first)")
            try:
                self._chan.send(message)
                return self._chan.recv_plain(time.monotonic() + timeout_s)
            except (
                wire.ChannelTimeout,
                EOFError,
                OSError,
                wire.FrameTooLarge,
                pickle.UnpicklingError,
            ) as exc:
                self.close()
                raise SandboxError(
                    f"the worker did not answer {message[0]!r} ({type(exc).__name__})"
                ) from None

    def close(self) -> None:
        self._drop_worker(lambda worker: worker.stop())

    def close_nowait(self) -> None:
        self._drop_worker(lambda worker: worker.stop_nowait())

    async def aclose_nowait(self) -> None:
        if self._worker is None or self._worker.stops_at_once:
            self.close_nowait()  # a kill and a hand-over to the reaper: no thread needed
        else:
            await super().aclose_nowait()

    def _drop_worker(self, stop: Any) -> None:
        with self._lock:
            if self._worker is not None:
                stop(self._worker)
            self._worker = None
            self._chan = None

    def _restart(self) -> None:
        self.close()
        self._launch()

    # ------------------------------------------------------------ cells
    def run(self, code: str, after: str | None = None) -> CellResult:
        with self._lock:
            self._begin_cell()
            try:
                return self._drive(self._cell(code, after))
            except _RunEnded as ended:  # the cell is over and the worker whole: it stays, variables kept
                raise ended.error from None
            except BaseException:
                self.close()  # the pipe is mid-conversation: nothing sane can follow
                raise
            finally:
                self._running = False

    def run_then(self, code: str, after: str) -> CellResult:
        """One round trip: the worker runs ``after`` itself once the cell is over."""
        return self.run(code, after)

    async def arun_then(self, code: str, after: str) -> CellResult:
        """``run_then`` driven by the running event loop: it waits for the worker's pipe there, and
        awaits a host function's coroutine form (``AsyncHostFunction.acall``) in place. A cell
        that makes one sub-call then costs no thread hand-overs; through a cell thread it cost
        four (to the thread, to the loop for the sub-call, back, and back to the loop at the
        end): about 0.9 ms of a 1.2 ms cell on the benchmark machine."""
        with self._lock:
            self._begin_cell()
            try:
                return await self._adrive(self._cell(code, after))
            except _RunEnded as ended:
                raise ended.error from None
            except BaseException:
                self.close()
                raise
            finally:
                self._running = False

    def _begin_cell(self) -> None:
        if self._chan is None:
            raise SandboxError("the sandbox is not started (call start() first)")
        if self._running:
            raise SandboxError("run() called from inside a host function of the same sandbox")
        self._running = True

    # One cell's conversation is written once, as a generator of the I/O it needs; ``_drive``
    # (a blocking thread) and ``_adrive`` (the event loop) carry that I/O out and send back its
    # result, or throw its exception in. The actions:
    #   (RECV, deadline)              -> the worker's next message
    #   (CALL, fn, args, kwargs)      -> what host function ``fn`` returned
    #   (DEATH, result, t_start, why[, ran]) -> the result of restarting a dead or wedged worker
    #   (DONE, result)                -> (from ``_advance``) the conversation is over
    def _drive(self, conversation: Generator) -> Any:
        action = _advance(conversation, None, None)
        while action[0] is not DONE:
            try:
                if action[0] is RECV:
                    reply = self._chan.recv_plain(action[1])
                elif action[0] is CALL:
                    reply = action[1](*action[2], **action[3])
                else:
                    reply = self._after_death(*action[1:])
            except BaseException as exc:  # noqa: BLE001 - the conversation decides what it means
                action = _advance(conversation, None, exc)
            else:
                action = _advance(conversation, reply, None)
        return action[1]

    async def _adrive(self, conversation: Generator) -> Any:
        action = _advance(conversation, None, None)
        while action[0] is not DONE:
            try:
                if action[0] is RECV:
                    reply = wire.loads_plain(await loop_io.next_frame(self._chan, action[1]))
                elif action[0] is CALL:
                    reply = await loop_io.call_on_loop(action[1], action[2], action[3])
                else:  # rare (a crash or a hang); on this thread, which holds the sandbox's lock
                    reply = self._after_death(*action[1:])
            except BaseException as exc:  # noqa: BLE001 - the conversation decides what it means
                action = _advance(conversation, None, exc)
            else:
                action = _advance(conversation, reply, None)
        return action[1]

    def _cell(self, code: str, after: str | None = None, sent: bool = False) -> Generator:
        result = CellResult()
        t_start = time.monotonic()
        timeout = self.limits.cell_timeout
        code_s = 0.0
        interrupted_until: float | None = None
        fatal: BaseException | None = None
        try:
            if not sent:
                self._chan.send(("run", code) if after is None else ("run", code, after))
        except OSError:  # it died between cells (e.g. killed from outside): this cell never ran
            return (yield DEATH, result, t_start, None, False)
        while True:
            if interrupted_until is not None:
                deadline = interrupted_until
            else:
                deadline = None if timeout is None else time.monotonic() + max(timeout - code_s, 0.0)
            t_wait = time.monotonic()
            try:
                msg = yield RECV, deadline
            except wire.ChannelTimeout:
                code_s += time.monotonic() - t_wait
                if interrupted_until is not None:  # it ignored the interrupt: kill, restart
                    result.timed_out = True
                    why = f"it ran past the {timeout}s cell timeout and did not stop when interrupted"
                    return (yield DEATH, result, t_start, why)
                self._worker.interrupt()  # KeyboardInterrupt in the cell; variables are kept
                interrupted_until = time.monotonic() + self.limits.interrupt_grace
                continue
            except (EOFError, OSError):
                return (yield DEATH, result, t_start, None)
            except (wire.FrameTooLarge, pickle.UnpicklingError) as exc:  # model code wrote to the pipe itself
                return (yield DEATH, result, t_start, f"the worker broke the pipe protocol ({exc})")
            code_s += time.monotonic() - t_wait
            if not (isinstance(msg, tuple) and len(msg) == {"call": 4, "done": 5}.get(msg and msg[0], -1)):
                # only model code writing to the pipe's fd produces this
                return (yield DEATH, result, t_start, "the worker broke the pipe protocol")
            if msg[0] == "call":
                if interrupted_until is not None:  # late call from a cell being interrupted
                    self._chan.send(("error", msg[1], "KeyboardInterrupt", "cell interrupted"))
                    continue
                t_call = time.monotonic()
                fatal = (yield from self._dispatch(msg, result)) or fatal
                result.host_s += time.monotonic() - t_call
            elif msg[0] == "done":
                _, result.stdout, result.stderr, result.error, finished = msg
                result.finished = result.finished or finished
                if interrupted_until is not None:
                    result.timed_out = True
                    result.error = (
                        f"TimeoutError: the cell ran past its {timeout}s time limit and was "
                        f"interrupted (variables are kept).\n{result.error or ''}"
                    ).rstrip()
                break
        result.duration_s = time.monotonic() - t_start
        if fatal is not None:
            raise _RunEnded(fatal)
        return result

    def _dispatch(self, msg: tuple, result: CellResult) -> Generator:
        """Run one host function for the worker and reply. Returns an exception that must end the run."""
        _, call_id, name, payload = msg
        fn = self._functions.get(name)
        try:
            args, kwargs = wire.loads_plain(payload)
        except Exception as exc:  # noqa: BLE001 - any malformed pickle from the worker is refused
            self._chan.send(
                ("error", call_id, "TypeError", f"arguments to {name}() must be plain data: {exc}")
            )
            return None
        if fn is None:
            self._chan.send(("error", call_id, "NameError", f"no host function named {name!r}"))
            return None
        try:
            value = yield CALL, fn, args, kwargs
        except Finish as fin:
            result.finished, result.finish_value = True, fin.value
            self._chan.send(("finish", call_id))
            return None
        except RunError as exc:  # e.g. BudgetExceeded: stop the cell, then end the run on the host
            self._chan.send(("finish", call_id))
            return exc
        except Exception as exc:  # noqa: BLE001 - a host function's error goes to the cell as an exception
            self._chan.send(("error", call_id, type(exc).__name__, str(exc)))
            return None
        except BaseException as exc:  # noqa: BLE001 - KeyboardInterrupt / SystemExit in the host
            self._chan.send(("finish", call_id))
            return exc
        try:
            reply = wire.dumps(("ok", call_id, wire.dumps(value)))
        except Exception as exc:  # noqa: BLE001 - pickling can fail with any exception type
            reply = wire.dumps(
                ("error", call_id, "TypeError", f"the result of {name}() cannot be sent into the REPL: {exc}")
            )
        self._chan.send_bytes(reply)
        return None

    def _after_death(
        self, result: CellResult, t_start: float, reason: str | None = None, ran: bool = True
    ) -> CellResult:
        """The worker died or was wedged: restart it from the inputs and say so in the result
        (``ran=False``: it was found dead before the cell reached it)."""
        if reason is None:
            ended = self._worker.describe_exit(wait_s=0.5)
            # alive, but it closed or corrupted its end of the pipe
            reason = f"the worker {ended}" if ended else "the worker stopped answering on its pipe"
            tail = self._worker.stderr_tail()
            if tail != "(no output)":
                reason += f" (stderr: {tail[-500:]})"
        if self._in_prelude:
            raise SandboxError(f"the sandbox prelude failed: {reason}")
        self._restart()
        result.restarted = True
        prefix = "TimeoutError: " if result.timed_out else "SandboxCrash: "
        result.error = f"{prefix}{reason}; the REPL was restarted and {self.relaunch.note}."
        if not ran:
            result.error += " This cell did not run."
        result.duration_s = time.monotonic() - t_start
        return result

    # ------------------------------------------------------------ values
    def get(self, name: str, default: Any = None) -> Any:
        with self._lock:
            if self._chan is None:
                raise SandboxError("the sandbox is not started (call start() first)")
            try:
                self._chan.send(("get", name))
                msg = self._chan.recv_plain(time.monotonic() + GET_TIMEOUT_S)
            except (wire.ChannelTimeout, EOFError, OSError) as exc:
                self._restart()
                raise SandboxError(
                    f"reading {name!r} from the sandbox failed ({type(exc).__name__}); "
                    "the worker was restarted"
                ) from None
            _, found, payload = msg
            if not found:
                return default
            if isinstance(payload, str):
                raise TypeError(f"variable {name!r} cannot leave the sandbox: {payload}")
            try:
                return wire.loads_plain(payload)
            except Exception as exc:  # noqa: BLE001 - any malformed pickle from the worker is refused
                raise TypeError(f"variable {name!r} cannot leave the sandbox: {exc}") from None


def _advance(conversation: Generator, reply: Any, error: BaseException | None) -> tuple:
    """Hand a conversation its last action's reply (or throw that action's error in); returns
    its next action, or ``(DONE, result)``. What the conversation raises propagates."""
    try:
        return conversation.send(reply) if error is None else conversation.throw(error)
    except StopIteration as done:
        return DONE, done.value

"""The default sandbox: one confined worker process per run, driven over two pipes.

The host side here spawns ``worker.py`` (which confines itself, see ``confine.py``), sends
the run's variables once, dispatches host-function calls from the worker, enforces the cell
timeout (code time only: time inside host functions does not count), interrupts a cell that
runs too long (SIGINT -> KeyboardInterrupt in the cell, variables kept), and kills and
restarts a worker that does not stop or that died (variables reset to the inputs).
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rlmkit.errors import ContextError, Finish, RunError, SandboxError
from rlmkit.sandbox import wire
from rlmkit.sandbox.base import CellResult, HostFunction, Sandbox, SandboxLimits, check_names

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.py")
START_TIMEOUT_S = 30.0
GET_TIMEOUT_S = 60.0
MAX_VALUE_BYTES = 256 * 1024**2  # largest pickled value get() accepts from the worker
# Shared libraries and data the interpreter may load lazily (read-only inside the worker).
SYSTEM_READ_ONLY = ["/usr/lib", "/usr/lib64", "/lib", "/lib64", "/usr/share/zoneinfo",
                    "/etc/ld.so.cache", "/etc/localtime"]
NETWORK_READ_ONLY = ["/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/gai.conf", "/etc/ssl",
                     "/etc/ca-certificates", "/usr/share/ca-certificates"]

# Workers die with the thread that spawned them (PR_SET_PDEATHSIG is per thread), so every
# worker is spawned from one long-lived thread rather than from a short-lived caller.
_spawner: ThreadPoolExecutor | None = None
_spawner_lock = threading.Lock()


def _spawn_thread() -> ThreadPoolExecutor:
    global _spawner
    with _spawner_lock:
        if _spawner is None:
            _spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rlmkit-sandbox-spawn")
        return _spawner


def _forget_spawner_after_fork() -> None:  # a forked host keeps no threads: it makes its own
    global _spawner, _spawner_lock
    _spawner, _spawner_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_spawner_after_fork)


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"


def _kill_and_clean(proc: subprocess.Popen | None, fds: list[int], workdir: str | None, errlog) -> None:
    """Module-level so a weakref finalizer can run it after the sandbox object is gone."""
    if proc is not None and proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # its own session: takes any children along
        except OSError:
            pass
        proc.wait()
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
    if errlog is not None:
        errlog.close()
    if workdir:
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)


class ProcessSandbox(Sandbox):
    """A confined worker process per run. ``confine=False`` skips the OS confinement (tests only)."""

    name = "process"

    def __init__(self, limits: SandboxLimits | None = None, *, confine: bool = True):
        super().__init__(limits)
        self.confine = confine
        self._lock = threading.RLock()  # re-entrant: a host function may call get() mid-cell
        self._running = False
        self._in_prelude = False
        self._proc: subprocess.Popen | None = None
        self._chan: wire.Channel | None = None
        self._finalizer = None
        self._variables: dict[str, Any] = {}
        self._functions: dict[str, HostFunction] = {}
        self._prelude = ""
        self._protections: dict[str, bool | str] = {}
        self.startup_s = 0.0  # seconds the last (re)start took, variables included

    @property
    def protections(self) -> dict[str, bool]:
        """Which OS protections are active in the current worker (reasons in ``protection_notes``)."""
        return {name: value is True for name, value in self._protections.items()}

    @property
    def protection_notes(self) -> dict[str, bool | str]:
        return dict(self._protections)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    # ------------------------------------------------------------ lifecycle
    def start(self, variables: dict[str, Any], functions: dict[str, HostFunction], prelude: str = "") -> None:
        check_names(variables, functions)
        with self._lock:
            self.close()
            self._variables, self._functions, self._prelude = dict(variables), dict(functions), prelude
            self._spawn()

    def _spawn(self) -> None:
        t0 = time.monotonic()
        lim = self.limits
        workdir = tempfile.mkdtemp(prefix="rlmkit-repl-")
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        config = {
            "rfd": to_worker_r, "wfd": from_worker_w, "workdir": workdir, "host_pid": os.getpid(),
            "confine": self.confine, "network": lim.network, "memory_bytes": lim.memory_bytes,
            "max_processes": lim.max_processes, "max_file_bytes": lim.max_file_bytes,
            "max_disk_bytes": lim.max_disk_bytes, "max_output_chars": lim.max_output_chars,
            "read_only": [sys.base_prefix, sys.prefix, *SYSTEM_READ_ONLY, *(NETWORK_READ_ONLY if lim.network else [])],
        }
        env = {"PATH": "/usr/bin:/bin", "HOME": workdir, "TMPDIR": workdir, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
        errlog = tempfile.TemporaryFile(prefix="rlmkit-repl-stderr-")  # noqa: SIM115 - lives as long as the worker
        cmd = [sys.executable, "-I", "-S", WORKER, json.dumps(config)]
        try:
            self._proc = _spawn_thread().submit(
                subprocess.Popen, cmd, pass_fds=(to_worker_r, from_worker_w), cwd=workdir, env=env,
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errlog, start_new_session=True,
            ).result()
        finally:
            os.close(to_worker_r)
            os.close(from_worker_w)
        # What the worker may send in one frame (a cell's output, a value for get()): bounded, so
        # model code writing to the pipe itself cannot make the host allocate without limit.
        max_frame = max(MAX_VALUE_BYTES, 8 * lim.max_output_chars + (1 << 20))
        self._chan = wire.Channel(from_worker_r, to_worker_w, max_frame=max_frame)
        self._errlog = errlog
        self._finalizer = weakref.finalize(
            self, _kill_and_clean, self._proc, [from_worker_r, to_worker_w], workdir, errlog
        )
        self.workdir = workdir
        try:
            msg = self._chan.recv_plain(time.monotonic() + START_TIMEOUT_S)
            if msg[0] != "ready":
                raise SandboxError(f"the REPL worker could not start: {msg[1]}")
            self._protections = msg[1]
            self._send_inputs()
        except (SandboxError, ContextError):
            self.close()
            raise
        except (wire.ChannelTimeout, EOFError, OSError) as exc:
            detail = self._worker_stderr()
            self.close()
            raise SandboxError(f"the REPL worker could not start ({type(exc).__name__}): {detail}") from None
        self.startup_s = time.monotonic() - t0

    def _send_inputs(self) -> None:
        chan = self._chan
        chan.send(("functions", {name: (fn.__doc__ or "") for name, fn in self._functions.items()}))
        sent: dict[int, str] = {}  # id -> first name: an input under two names crosses once
        for name, value in self._variables.items():
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
                raise ContextError(f"variable {name!r} ({type(value).__name__}) cannot be sent into the "
                                   f"sandbox: {exc}") from None
        chan.send(("loaded",))
        errors = chan.recv_plain(time.monotonic() + START_TIMEOUT_S)[1]
        if errors:
            raise ContextError("variables could not be rebuilt inside the sandbox (it has only the "
                               "standard library): " + "; ".join(errors))
        if self._prelude:
            self._in_prelude = True  # a worker dying here is not restarted (it would die again)
            try:
                result = self._run_locked(self._prelude)
            finally:
                self._in_prelude = False
            if result.error or result.restarted:
                raise SandboxError(f"the sandbox prelude failed:\n{result.error}")

    def _worker_stderr(self) -> str:
        try:
            self._errlog.seek(0, os.SEEK_END)
            size = self._errlog.tell()
            self._errlog.seek(max(size - 2000, 0))
            return self._errlog.read().decode("utf-8", "replace").strip() or "(no output)"
        except (OSError, ValueError, AttributeError):
            return "(no output)"

    def close(self) -> None:
        with self._lock:
            if self._finalizer is not None:
                self._finalizer()
            self._finalizer = None
            self._proc = None
            self._chan = None

    def _restart(self) -> None:
        self.close()
        self._spawn()

    # ------------------------------------------------------------ cells
    def run(self, code: str) -> CellResult:
        with self._lock:
            if self._chan is None:
                raise SandboxError("the sandbox is not started (call start() first)")
            if self._running:
                raise SandboxError("run() called from inside a host function of the same sandbox")
            self._running = True
            try:
                return self._run_locked(code)
            except BaseException:
                self.close()  # the pipe is mid-conversation: nothing sane can follow
                raise
            finally:
                self._running = False

    def _run_locked(self, code: str) -> CellResult:
        result = CellResult()
        t_start = time.monotonic()
        timeout = self.limits.cell_timeout
        code_s = 0.0
        interrupted_until: float | None = None
        fatal: BaseException | None = None
        try:
            self._chan.send(("run", code))
        except OSError:
            return self._after_death(result, t_start)
        while True:
            if interrupted_until is not None:
                deadline = interrupted_until
            else:
                deadline = None if timeout is None else time.monotonic() + max(timeout - code_s, 0.0)
            t_wait = time.monotonic()
            try:
                msg = self._chan.recv_plain(deadline)
            except wire.ChannelTimeout:
                code_s += time.monotonic() - t_wait
                if interrupted_until is not None:  # it ignored the interrupt: kill, restart
                    result.timed_out = True
                    return self._after_death(result, t_start, reason=f"it ran past the {timeout}s cell "
                                             "timeout and did not stop when interrupted")
                try:
                    os.kill(self._proc.pid, signal.SIGINT)
                except ProcessLookupError:  # it died just now: the next read sees EOF
                    pass
                interrupted_until = time.monotonic() + self.limits.interrupt_grace
                continue
            except (EOFError, OSError):
                return self._after_death(result, t_start)
            except (wire.FrameTooLarge, pickle.UnpicklingError) as exc:  # model code wrote to the pipe itself
                return self._after_death(result, t_start, reason=f"the worker broke the pipe protocol ({exc})")
            code_s += time.monotonic() - t_wait
            if not (isinstance(msg, tuple) and len(msg) == {"call": 4, "done": 5}.get(msg and msg[0], -1)):
                # only model code writing to the pipe's fd produces this
                return self._after_death(result, t_start, reason="the worker broke the pipe protocol")
            if msg[0] == "call":
                if interrupted_until is not None:  # late call from a cell being interrupted
                    self._chan.send(("error", msg[1], "KeyboardInterrupt", "cell interrupted"))
                    continue
                t_call = time.monotonic()
                fatal = self._dispatch(msg, result) or fatal
                result.host_s += time.monotonic() - t_call
            elif msg[0] == "done":
                _, result.stdout, result.stderr, result.error, finished = msg
                result.finished = result.finished or finished
                if interrupted_until is not None:
                    result.timed_out = True
                    result.error = (f"TimeoutError: the cell ran past its {timeout}s time limit and was "
                                    f"interrupted (variables are kept).\n{result.error or ''}").rstrip()
                break
        result.duration_s = time.monotonic() - t_start
        if fatal is not None:
            raise fatal
        return result

    def _dispatch(self, msg: tuple, result: CellResult) -> BaseException | None:
        """Run one host function for the worker and reply. Returns an exception that must end the run."""
        _, call_id, name, payload = msg
        fn = self._functions.get(name)
        try:
            args, kwargs = wire.loads_plain(payload)
        except Exception as exc:  # noqa: BLE001 - any malformed pickle from the worker is refused
            self._chan.send(("error", call_id, "TypeError", f"arguments to {name}() must be plain data: {exc}"))
            return None
        if fn is None:
            self._chan.send(("error", call_id, "NameError", f"no host function named {name!r}"))
            return None
        try:
            value = fn(*args, **kwargs)
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
            reply = wire.dumps(("error", call_id, "TypeError",
                                f"the result of {name}() cannot be sent into the REPL: {exc}"))
        self._chan.send_bytes(reply)
        return None

    def _after_death(self, result: CellResult, t_start: float, reason: str | None = None) -> CellResult:
        """The worker died or was wedged: restart it from the inputs and say so in the result."""
        proc = self._proc
        if reason is None:
            try:
                code = proc.wait(timeout=0.5) if proc is not None else None
                reason = f"the worker {_describe_exit(code)}"
            except subprocess.TimeoutExpired:  # alive, but it closed or corrupted its end of the pipe
                reason = "the worker stopped answering on its pipe"
            tail = self._worker_stderr()
            if tail != "(no output)":
                reason += f" (stderr: {tail[-500:]})"
        if self._in_prelude:
            raise SandboxError(f"the sandbox prelude failed: {reason}")
        self._restart()
        result.restarted = True
        prefix = "TimeoutError: " if result.timed_out else "SandboxCrash: "
        result.error = (f"{prefix}{reason}; the REPL was restarted and its variables were reset to "
                        f"the inputs.")
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
                raise SandboxError(f"reading {name!r} from the sandbox failed ({type(exc).__name__}); "
                                   "the worker was restarted") from None
            _, found, payload = msg
            if not found:
                return default
            if isinstance(payload, str):
                raise TypeError(f"variable {name!r} cannot leave the sandbox: {payload}")
            try:
                return wire.loads_plain(payload)
            except Exception as exc:  # noqa: BLE001 - any malformed pickle from the worker is refused
                raise TypeError(f"variable {name!r} cannot leave the sandbox: {exc}") from None

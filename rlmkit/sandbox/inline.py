"""Host side: the inline sandbox, cells run with ``exec`` in the host process. DEBUG ONLY.

No isolation whatsoever: model code can read and write any file the host can, reach the
network, and kill the host. Use it to step through a run in a debugger. Same interface and
Finish semantics as the process sandbox; the timeout is best effort (an exception is
injected into the cell's thread between bytecodes; code stuck inside C cannot be stopped),
and stdout capture swaps ``sys.stdout`` for the whole process while a cell runs.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
import time
from typing import Any, Self

from rlmkit.errors import Finish, RunError
from rlmkit.sandbox.base import CellResult, HostFunction, Sandbox, check_names
from rlmkit.sandbox.worker_side import cells


class _CellTimer:
    """Counts code time (not host-function time) and interrupts the cell's thread when it is spent."""

    def __init__(self, timeout: float | None):
        self.timeout = timeout
        self.host_s = 0.0
        self.in_host = 0
        self.fired = False
        self._stop = threading.Event()
        self._lock = threading.Lock()  # firing and stopping never interleave
        self._thread_id = threading.get_ident()
        self._t0 = time.monotonic()

    def code_s(self) -> float:
        return time.monotonic() - self._t0 - self.host_s

    def watch(self) -> None:
        while not self._stop.wait(0.02):
            with self._lock:
                if self._stop.is_set():
                    return
                if not self.in_host and self.code_s() > self.timeout:
                    self.fired = True
                    self._async_raise(KeyboardInterrupt)
                    return

    def _async_raise(self, exc_type: type | None) -> None:
        # CPython only; ``None`` clears an exception that was not delivered yet.
        ctypes.pythonapi.PyThreadState_SetAsyncExc(
            ctypes.c_ulong(self._thread_id), ctypes.py_object(exc_type) if exc_type else None
        )

    def __enter__(self) -> Self:
        if self.timeout is not None:
            threading.Thread(target=self.watch, daemon=True, name="rlmkit-inline-timer").start()
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._stop.set()
            if self.fired:
                self._async_raise(None)


class InlineSandbox(Sandbox):
    """exec in the host process. Debug only: no protection of any kind."""

    name = "inline"

    def __init__(self, limits=None):
        super().__init__(limits)
        self._namespace: dict[str, Any] | None = None
        self._timer: _CellTimer | None = None
        self._finished = False
        self._fatal: RunError | None = None  # a host function's RunError, raised after its cell stops
        self._count = 0

    def start(self, variables: dict[str, Any], functions: dict[str, HostFunction], prelude: str = "") -> None:
        check_names(variables, functions)
        self._namespace = {"__name__": "__main__", "__builtins__": __builtins__, **variables}
        for name, fn in functions.items():
            self._namespace[name] = self._wrap(name, fn)
        if prelude:
            result = self.run(prelude)
            if result.error:
                from rlmkit.errors import SandboxError

                raise SandboxError(f"the sandbox prelude failed:\n{result.error}")

    def _wrap(self, name: str, fn: HostFunction) -> HostFunction:
        def call(*args: Any, **kwargs: Any) -> Any:
            if self._finished:  # the model swallowed the first Finish: keep ending the cell
                raise Finish(self._finish_value)
            timer = self._timer
            t0 = time.monotonic()
            if timer:
                timer.in_host += 1
            try:
                return fn(*args, **kwargs)
            except Finish as fin:
                self._finished, self._finish_value = True, fin.value
                raise
            except RunError as exc:  # e.g. BudgetExceeded: stop the cell, then end the run on the host
                self._finished, self._fatal = True, exc
                raise Finish(None) from None
            finally:
                if timer:
                    timer.in_host -= 1
                    timer.host_s += time.monotonic() - t0

        call.__name__ = call.__qualname__ = name
        call.__doc__ = fn.__doc__
        return call

    def run(self, code: str) -> CellResult:
        if self._namespace is None:
            from rlmkit.errors import SandboxError

            raise SandboxError("the sandbox is not started (call start() first)")
        self._count += 1
        filename = cells.CELL_FILE.format(self._count)
        limit = self.limits.max_output_chars
        out, err = cells.BoundedText(limit), cells.BoundedText(limit)
        result = CellResult()
        self._finished, self._finish_value, self._fatal = False, None, None
        t0 = time.monotonic()
        with _CellTimer(self.limits.cell_timeout) as timer:
            self._timer = timer
            try:
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                    cells.execute(code, filename, self._namespace)
            except Finish:
                pass
            except BaseException as exc:  # noqa: BLE001 - the cell's own error, reported as a traceback
                result.error = cells.format_error(exc, filename, code)
            finally:
                self._timer = None
        result.stdout, result.stderr = out.getvalue(), err.getvalue()
        result.finished, result.finish_value = self._finished, self._finish_value
        result.timed_out = timer.fired
        if timer.fired:
            result.error = (
                f"TimeoutError: the cell ran past its {self.limits.cell_timeout}s time limit and "
                f"was interrupted (variables are kept).\n{result.error or ''}"
            ).rstrip()
        result.duration_s, result.host_s = time.monotonic() - t0, timer.host_s
        if self._fatal is not None:
            raise self._fatal
        return result

    def get(self, name: str, default: Any = None) -> Any:
        return (self._namespace or {}).get(name, default)

    def close(self) -> None:
        self._namespace = None

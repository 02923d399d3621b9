"""Host side: the monty sandbox, pydantic-monty's Rust Python interpreter (optional extra
``monty``), run in the host process.

Safe by construction (no filesystem, network, subprocess or ctypes exist inside it) and
fast (millisecond cells), but it runs a subset of Python: no generators (``yield``), no class
inheritance (so no custom exception classes), no ``bytearray``, and only some stdlib modules
(``re``, ``json``, ``collections``, ``math``, ``itertools``, ``random``, ``datetime``,
``hashlib``, ``dataclasses``, ``typing``; not ``textwrap``, ``heapq``, ``string``,
``statistics``, ``contextlib``). See ``benchmarks/sandbox/sandbox_bench.py`` for the survey.

Host functions are driven through monty's snapshots: a host function that raises Finish is
answered with a private BaseException inside the sandbox (``except Exception`` cannot catch
it), exactly like the process sandbox. On a timeout or a crash the session is replaced
(monty gives no guarantee about a heap stopped mid-operation), so ``restarted`` is set.
"""

from __future__ import annotations

from typing import Any

from rlmkit.errors import ConfigError, Finish, RunError, SandboxError, install_hint
from rlmkit.sandbox.base import CellResult, HostFunction, Sandbox, SandboxLimits, check_names
from rlmkit.sandbox.worker_side import cells

try:
    import pydantic_monty as pm
except ImportError:  # pragma: no cover - exercised only without the extra
    pm = None

MAX_HOST_CALLS = 10**9  # monty counts suspensions per session (default 1000): effectively unbounded


class FinishSignal(BaseException):
    pass


class MontySandbox(Sandbox):
    name = "monty"

    def __init__(self, limits: SandboxLimits | None = None):
        if pm is None:
            raise ConfigError(f"sandbox 'monty' needs the optional extra: {install_hint('monty')}")
        super().__init__(limits)
        self._pool = None
        self._session = None
        self._variables: dict[str, Any] = {}
        self._functions: dict[str, HostFunction] = {}
        self._prelude = ""

    @property
    def protections(self) -> dict[str, bool]:
        on = self._session is not None
        return {
            "interpreter_without_os_access": on,
            "memory_limit": on and bool(self.limits.memory_bytes),
            "no_network": on,
            "no_subprocess": on,
            "no_filesystem": on,
        }

    def start(self, variables: dict[str, Any], functions: dict[str, HostFunction], prelude: str = "") -> None:
        check_names(variables, functions)
        self.close()
        self._variables, self._functions, self._prelude = dict(variables), dict(functions), prelude
        self._open()

    def _open(self) -> None:
        limits = {"max_suspensions": MAX_HOST_CALLS}
        if self.limits.cell_timeout is not None:
            limits["max_feed_duration_secs"] = float(self.limits.cell_timeout)
        if self.limits.memory_bytes:
            limits["max_memory"] = int(self.limits.memory_bytes)
        self._pool = pm.Monty(min_processes=1, max_processes=1)
        self._pool.__enter__()
        self._session = self._pool.checkout(limits=limits)
        self._session.__enter__()
        try:
            self._session.feed_run("pass", inputs=self._variables)
        except (pm.MontyError, ValueError, TypeError) as exc:
            self.close()
            raise SandboxError(f"the variables could not be sent into monty: {exc}") from None
        if self._prelude:
            result = self.run(self._prelude)
            if result.error:
                raise SandboxError(f"the sandbox prelude failed:\n{result.error}")

    def close(self) -> None:
        session, pool = self._session, self._pool
        self._session = self._pool = None
        for ctx in (session, pool):
            if ctx is not None:
                try:
                    ctx.__exit__(None, None, None)
                except Exception:  # noqa: BLE001, S110 - a crashed worker cannot be closed twice; nothing to free
                    pass

    def run(self, code: str) -> CellResult:
        import time

        if self._session is None:
            raise SandboxError("the sandbox is not started (call start() first)")
        limit = self.limits.max_output_chars
        out, err = cells.BoundedText(limit), cells.BoundedText(limit)
        result = CellResult()
        t0 = time.monotonic()
        fatal: BaseException | None = None

        def on_print(stream: str, text: str) -> None:
            (err if stream == "stderr" else out).write(text)

        try:
            snap = self._session.feed_start(code, print_callback=on_print)
            while not isinstance(snap, pm.MontyComplete):
                if (
                    isinstance(snap, pm.FunctionSnapshot)
                    and not snap.is_os_function
                    and snap.function_name in self._functions
                ):
                    t_call = time.monotonic()
                    answer, fatal = self._call(snap, result, fatal)
                    result.host_s += time.monotonic() - t_call
                    snap = snap.resume(answer)
                elif isinstance(snap, pm.NameLookupSnapshot) and snap.variable_name in self._functions:
                    snap = snap.resume(value=self._functions[snap.variable_name])
                else:
                    snap = snap.resume_auto()
            if snap.output is not None:
                out.write(repr(snap.output) + "\n")
        except pm.MontyRuntimeError as exc:
            if not (result.finished or fatal is not None):  # else it is our own stop signal unwinding
                result.error = exc.display("traceback")
            if "TimeoutError" in exc.display("type-msg").split(":")[0]:
                result.timed_out = True
                result.restarted = self._restart_quietly()
        except (pm.MontyCrashedError, pm.MontyDisconnectError) as exc:
            result.error = (
                f"SandboxCrash: the monty worker died ({exc}); it was restarted and its variables "
                "reset to the inputs."
            )
            result.restarted = self._restart_quietly()
        except pm.MontyError as exc:  # syntax and other errors that leave the session usable
            result.error = str(exc)
        result.stdout, result.stderr = out.getvalue(), err.getvalue()
        result.duration_s = time.monotonic() - t0
        if fatal is not None:
            raise fatal
        return result

    def _call(self, snap, result: CellResult, fatal):
        if result.finished or fatal is not None:  # the model swallowed the first signal: repeat it
            return {"exception": FinishSignal("finished")}, fatal
        try:
            return {"return_value": self._functions[snap.function_name](*snap.args, **snap.kwargs)}, None
        except Finish as fin:
            result.finished, result.finish_value = True, fin.value
            return {"exception": FinishSignal("finished")}, None
        except RunError as exc:  # e.g. BudgetExceeded: stop the cell, then end the run on the host
            return {"exception": FinishSignal("stopped")}, exc
        except Exception as exc:  # noqa: BLE001 - a host function's error goes to the cell as an exception
            return {"exception": exc}, None

    def _restart_quietly(self) -> bool:
        self.close()
        self._open()
        return True

    def get(self, name: str, default: Any = None) -> Any:
        if self._session is None:
            raise SandboxError("the sandbox is not started (call start() first)")
        if not name.isidentifier():
            return default
        try:
            return self._session.feed_run(name)
        except pm.MontyRuntimeError as exc:
            if exc.display("type-msg").startswith("NameError"):
                return default
            raise TypeError(
                f"variable {name!r} cannot leave the sandbox: {exc.display('type-msg')}"
            ) from None

"""Host side: the sandbox interface, one small contract, several backends.

A sandbox holds a Python namespace that persists across cells. The host puts the run's
inputs in once (``start``), then runs cells (``run``). Code in the sandbox calls host
functions (``llm_query``, typed sub-calls, ``SUBMIT`` ...) by name; arguments and results
cross as pickles. A host function that raises ``rlmkit.errors.Finish`` ends the cell at
once (the sandbox raises its own BaseException inside the cell, which the model's
``except Exception`` cannot catch) and the cell result carries ``finished=True`` and the
Finish value.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Self

from rlmkit.concurrency.threads import in_thread

HostFunction = Callable[..., Any]


class AsyncHostFunction:
    """A host function with a coroutine form, ``acall``, for sandboxes that talk to their worker
    from the run's event loop (``WorkerHost.arun_then`` awaits it there, with no thread between).
    Called plainly, from a cell thread, it runs ``call``. A host function without ``acall`` may
    block (a user's tool): such a sandbox runs it on a thread."""

    def __init__(self, call: HostFunction, acall: Callable[..., Awaitable[Any]]):
        self.call, self.acall = call, acall
        self.__doc__ = getattr(acall, "__doc__", None)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.call(*args, **kwargs)

    @classmethod
    def quick(cls, fn: HostFunction) -> AsyncHostFunction:
        """``fn`` never blocks (``SUBMIT``: it checks the outputs and raises ``Finish``): the event
        loop may call it in place."""

        async def acall(*args: Any, **kwargs: Any) -> Any:
            return fn(*args, **kwargs)

        acall.__doc__ = fn.__doc__
        return cls(fn, acall)


@dataclass
class SandboxLimits:
    """OS-level limits for a sandbox. ``None`` disables a limit."""

    cell_timeout: float | None = 60.0  # seconds of code time per cell (time waiting on host calls excluded)
    memory_bytes: int | None = 4 * 1024**3  # address-space limit of the worker
    max_processes: int | None = 0  # extra processes the worker may create (0: none)
    max_output_chars: int = 1_000_000  # stdout/stderr kept per cell (head + tail) before the model's own cut
    max_file_bytes: int | None = 256 * 1024**2  # largest file the worker may write
    network: bool = False
    max_disk_bytes: int | None = 512 * 1024**2  # size of the working dir (a private tmpfs where available)
    interrupt_grace: float = 1.0  # seconds a timed-out cell gets to stop after SIGINT before a kill+restart


@dataclass
class CellResult:
    stdout: str = ""
    stderr: str = ""
    error: str | None = None  # formatted traceback (or a message) of what the cell raised
    timed_out: bool = False
    restarted: bool = False  # the worker was killed and restarted (its variables are reset to the inputs)
    finished: bool = False  # a host function raised Finish
    finish_value: Any = None
    duration_s: float = 0.0  # wall time of the cell
    host_s: float = 0.0  # of which spent inside host functions


class Sandbox(ABC):
    """Backends: ``process`` (default), ``inline`` (debug only), ``monty`` (optional)."""

    name: str = "base"

    def __init__(self, limits: SandboxLimits | None = None):
        self.limits = limits or SandboxLimits()

    @abstractmethod
    def start(
        self,
        variables: dict[str, Any],
        functions: dict[str, HostFunction],
        prelude: str = "",
    ) -> None:
        """Create the namespace with ``variables``, host ``functions`` and run ``prelude`` once.

        ``prelude`` is Python source (defines wrappers such as ``FINAL_VAR`` or
        ``classify.batched`` on top of the host functions). Variables cross exactly once.
        """

    async def astart(
        self, variables: dict[str, Any], functions: dict[str, HostFunction], prelude: str = ""
    ) -> None:
        """``start`` from the run's event loop: here on a thread, as it may block."""
        await in_thread(self.start, variables, functions, prelude)

    @abstractmethod
    def run(self, code: str) -> CellResult:
        """Run one cell; never raises for errors in the code (they go into the result)."""

    def run_then(self, code: str, after: str) -> CellResult:
        """Run ``code``, then, unless it finished the run, ``after`` (its printed output is added to
        the cell's; its errors are not the cell's). A backend with a round trip per cell does both
        in one (``WorkerHost``)."""
        result = self.run(code)
        if not result.finished:
            result.stdout += self.run(after).stdout
        return result

    async def arun_then(self, code: str, after: str) -> CellResult:
        """``run_then`` from the run's event loop. Here: on a thread of its own, whose host function
        calls hand their coroutines back to the loop. ``WorkerHost`` drives its pipe from the
        loop instead."""
        return await in_thread(self.run_then, code, after)

    @abstractmethod
    def get(self, name: str, default: Any = None) -> Any:
        """Read a variable back from the namespace (pickled across), or ``default``."""

    @abstractmethod
    def close(self) -> None:
        """Stop the worker and remove its working directory. Idempotent."""

    def close_nowait(self) -> None:
        """Stop the worker now; what is left (reaping a process, removing its directory) may finish
        in the background. A run ends with this, so its caller never waits on the clean-up."""
        self.close()

    async def aclose_nowait(self) -> None:
        """``close_nowait`` from the run's event loop: here on a thread, as it may block."""
        await in_thread(self.close_nowait)

    @property
    def protections(self) -> dict[str, bool]:
        """Which isolation mechanisms are active (name -> on). Empty: no isolation at all."""
        return {}

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_names(variables: dict[str, Any], functions: dict[str, HostFunction]) -> None:
    """Variables and host functions become Python names in the REPL: reject anything else early."""
    import keyword

    from rlmkit.errors import ConfigError

    for kind, names in (("variable", variables), ("host function", functions)):
        for name in names:
            if not (isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name)):
                raise ConfigError(f"{kind} name {name!r} is not a valid Python identifier")
    both = set(variables) & set(functions)
    if both:
        raise ConfigError(f"names used both as a variable and a host function: {sorted(both)}")
    for name, fn in functions.items():
        if not callable(fn):
            raise ConfigError(f"host function {name!r} is not callable ({type(fn).__name__})")

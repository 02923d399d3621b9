"""Where eval examples run: threads in this process (the default) or tasks on a Ray cluster.

Both take the same jobs, ``(kind, source, example, sample)`` with ``source`` a program or
a zero-argument factory of programs and ``example`` one example or a tuple of examples that
share a context (asked in one session: ``programs.evaluate.run_job``), and yield what the
runner returns, ``(row, trajectory)`` or a list of them, in the caller's thread as each job
finishes, so ``programs.evaluate`` records, resumes and reports the same way whichever runs them.

On Ray each job is one task: the worker builds the program (a factory is called there, so
every task gets its own RLM and sandbox, and a group its one session), runs it and sends the
rows and the trajectories back. Ray retries a task whose worker process or node died
(``max_retries``), so a lost worker costs only the job it was running (a group is asked again
from its first question, in a new session); a task that still cannot finish comes back as a
failed row (``worker_lost``) per example and the others go on. The program (or
factory) and the metric are pickled to the workers, so they must be importable there:
install rlmkit on every node (or ship it with Ray's ``runtime_env``).
"""

from __future__ import annotations

import inspect
import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

import dspy

from programs.eval_results import ExampleResult
from rlmkit.errors import ConfigError, UserError, install_hint

Job = tuple[str, Any, Any, int]  # (kind, program or factory, example, sample)
Runner = Callable[..., tuple[Any, Any]]  # runner(program, example, kind=, sample=) -> (row, trajectory)
LOCAL = "local"  # --ray with no address: start a Ray instance on this machine for the call


def is_factory(obj: Any) -> bool:
    """A zero-argument callable that is not itself a program builds one program per worker."""
    if isinstance(obj, dspy.Module) or not callable(obj):
        return False
    try:
        params = inspect.signature(obj).parameters.values()
    except (TypeError, ValueError):
        return False
    return not any(p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL) or p.default is p.empty for p in params)


class ThreadExecutor:
    """``workers`` threads in this process; a factory builds one program per thread."""

    def __init__(self, workers: int):
        self.workers = workers

    def run(self, jobs: Sequence[Job], runner: Runner) -> Iterator[tuple[Any, Any]]:
        local = threading.local()

        def work(kind: str, source: Any, example: Any, sample: int) -> tuple[Any, Any]:
            if is_factory(source):  # programs need not be thread-safe: one per thread
                cache = local.__dict__.setdefault("programs", {})
                if kind not in cache:
                    cache[kind] = source()
                source = cache[kind]
            return runner(source, example, kind=kind, sample=sample)

        with ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="rlmkit-eval") as pool:
            futures = [pool.submit(work, *job) for job in jobs]
            for future in as_completed(futures):
                yield future.result()


def _run_task(runner: Runner, kind: str, source: Any, example: Any, sample: int) -> tuple[Any, Any]:
    """One example on a Ray worker: its own program (and so its own sandbox) for this task."""
    program = source() if is_factory(source) else source
    return runner(program, example, kind=kind, sample=sample)


class RayExecutor:
    """Examples as Ray tasks on the cluster at ``address`` (``"local"``: a Ray instance started for
    the call and stopped after it; ``"auto"``: the cluster ``ray start`` made on this machine).

    ``num_cpus``: CPUs Ray reserves per example (an RLM mostly waits on its LM, so a fraction
    packs several examples on one core); ``max_retries``: reruns of an example whose worker died.
    """

    def __init__(self, address: str = LOCAL, *, num_cpus: float = 1.0, max_retries: int = 3):
        try:
            import ray
        except ImportError as exc:
            raise ConfigError(f"eval on Ray needs the cluster extra: {install_hint('cluster')}") from exc
        if not isinstance(address, str) or not address.strip():
            raise UserError(f"ray address must be 'local', 'auto' or host:port, got {address!r}")
        if num_cpus <= 0 or max_retries < 0:
            raise UserError("num_cpus must be > 0 and max_retries >= 0")
        self.ray, self.address = ray, address
        self.num_cpus, self.max_retries = num_cpus, max_retries

    def _connect(self) -> bool:
        """Join (or start) Ray; True when this call started it and so must stop it."""
        if self.ray.is_initialized():
            return False  # the caller's own Ray session: use it, leave it running
        _probe(self.address)
        try:
            self.ray.init(
                address=None if self.address == LOCAL else self.address,
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
            )
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ConfigError(f"cannot reach the Ray cluster at {self.address!r}: {exc}") from exc
        return True

    def run(self, jobs: Sequence[Job], runner: Runner) -> Iterator[tuple[Any, Any]]:
        ray = self.ray
        started = self._connect()
        try:
            task = ray.remote(num_cpus=self.num_cpus, max_retries=self.max_retries)(_run_task)
            runner_ref = ray.put(runner)
            sources = {kind: ray.put(source) for kind, source, *_ in jobs}  # shipped once, not per task
            pending = {
                task.remote(runner_ref, kind, sources[kind], example, sample): (kind, example, sample)
                for kind, _, example, sample in jobs
            }
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                for ref in ready:
                    kind, example, sample = pending.pop(ref)
                    try:
                        result = ray.get(ref)
                    except ray.exceptions.RayTaskError as exc:  # the task raised, as it would in a thread
                        raise exc.as_instanceof_cause() from None
                    except ray.exceptions.RayError as exc:  # its worker or node died past max_retries
                        if isinstance(example, tuple):  # a group sharing a context: a row per question
                            result = [(_lost(kind, e, sample, exc), None) for e in example]
                        else:
                            result = _lost(kind, example, sample, exc), None
                    yield result
        finally:
            if started:
                ray.shutdown()


def _probe(address: str, timeout_s: float = 5.0) -> None:
    """Fail fast on a host:port nobody listens on: Ray itself retries such an address for minutes."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if address in (LOCAL, "auto") or not sep or not port.isdigit():
        return  # 'auto' fails fast by itself; anything else is Ray's to parse
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise ConfigError(f"cannot reach the Ray cluster at {address!r}: {exc}") from exc


def _lost(kind: str, example: Any, sample: int, exc: BaseException) -> Any:
    """The row of an example Ray gave up on (its worker kept dying, or the task could not run)."""
    cause = getattr(exc, "cause", None) or exc
    lines = str(cause).strip().splitlines() or [type(cause).__name__]
    return ExampleResult(
        id=example.id,
        suite=example.suite,
        sample=sample,
        program=kind,
        status="failed",
        failure="worker_lost",
        error=f"{type(cause).__name__}: {lines[-1]}"[:2_000],
    )


def make_executor(workers: int, ray: bool | str | None = None) -> ThreadExecutor | RayExecutor:
    """Threads unless ``ray`` is set: True (or "local") for a local Ray instance, else an address."""
    if ray is None or ray is False:
        return ThreadExecutor(workers)
    return RayExecutor(LOCAL if ray is True else ray)

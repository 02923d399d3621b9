"""Host side: the default sandbox, one confined worker process per run, on this machine, over
two pipes.

This file is only the launcher: it spawns ``worker_side/worker.py`` (by path, never imported) in
its own session with a scrubbed environment, and the worker confines itself (namespaces, uid,
Landlock, seccomp, rlimits: see ``worker_side/confine.py``). The conversation with the worker
(inputs, cells, timeouts, sub-calls, restarts) is ``host.WorkerHost``'s, shared by every launcher.
"""

from __future__ import annotations

import marshal
import os
import signal
import subprocess
import sys
import tempfile
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor

from rlmkit.sandbox import pool
from rlmkit.sandbox.base import SandboxLimits
from rlmkit.sandbox.fork_server_client import ForkedProcess, ForkServerClient, ForkServerGone
from rlmkit.sandbox.host import Relaunch, WorkerHost, max_frame
from rlmkit.sandbox.launcher import Launcher, WorkerHandle
from rlmkit.sandbox.worker_side import wire

# The worker's entry, started by path (``python -I -S WORKER``): the host never imports it.
WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker_side", "worker.py")
# Shared libraries and data the interpreter may load lazily (read-only inside the worker).
SYSTEM_READ_ONLY = [
    "/usr/lib",
    "/usr/lib64",
    "/lib",
    "/lib64",
    "/usr/share/zoneinfo",
    "/etc/ld.so.cache",
    "/etc/localtime",
]
NETWORK_READ_ONLY = [
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/nsswitch.conf",
    "/etc/gai.conf",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/usr/share/ca-certificates",
]

# Workers die with the thread that spawned them (PR_SET_PDEATHSIG is per thread), so every
# worker is spawned from one long-lived thread rather than from a short-lived caller.
_threads: dict[str, ThreadPoolExecutor] = {}
_threads_lock = threading.Lock()


def _thread(role: str) -> ThreadPoolExecutor:
    """One long-lived thread per role: "spawn" starts workers, "reap" cleans up after stopped ones
    (so a run's end never waits for it, and a spawn never queues behind a clean-up)."""
    with _threads_lock:
        if role not in _threads:
            _threads[role] = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"rlmkit-sandbox-{role}")
        return _threads[role]


_live_workers: weakref.WeakSet[ProcessWorkerHandle] = weakref.WeakSet()


def _forget_after_fork() -> None:
    """A forked host keeps no threads (it makes its own) and owns none of its parent's workers, nor
    its fork server."""
    global _threads_lock, _fork_server
    _threads.clear()
    _threads_lock = threading.Lock()
    if _fork_server is not None:
        _fork_server.forget()
        _fork_server = None
    for worker in list(_live_workers):
        worker.forget()


os.register_at_fork(after_in_child=_forget_after_fork)


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"


def _kill(proc: subprocess.Popen | ForkedProcess) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # its own session: takes any children along
        except OSError:
            pass


def _kill_and_clean(
    proc: subprocess.Popen | ForkedProcess | None,
    fds: list[int],
    workdir: str | None,
    errlog,
    owner: int | None = None,
) -> None:
    """Module-level so a weakref finalizer can run it after the sandbox object is gone. In a forked
    copy of the host (``owner`` is another pid) the worker is the parent's: it is left alone, even
    when the fork came between the finalizer's registration and ``_forget_after_fork``'s view."""
    if owner is not None and owner != os.getpid():
        return
    if proc is not None:
        _kill(proc)
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


def _clean_up(*args) -> None:
    """The finalizer: ``_kill_and_clean`` as it is when the worker stops, not when it started (a
    pooled worker starts long before its run)."""
    _kill_and_clean(*args)


class ProcessWorkerHandle(WorkerHandle):
    """The host's handle on a worker process on this machine; its finalizer kills the process even
    if the sandbox is dropped."""

    def __init__(self, proc: subprocess.Popen, channel: wire.Channel, fds: list[int], workdir: str,
                 errlog) -> None:  # fmt: skip
        self.proc, self.channel, self.pid, self.workdir = proc, channel, proc.pid, workdir
        self._errlog = errlog
        self._finalizer = weakref.finalize(self, _clean_up, proc, fds, workdir, errlog, os.getpid())
        _live_workers.add(self)

    def interrupt(self) -> None:
        try:
            os.kill(self.proc.pid, signal.SIGINT)
        except ProcessLookupError:  # it died just now: the next read sees EOF
            pass

    def describe_exit(self, wait_s: float) -> str | None:
        try:
            return _describe_exit(self.proc.wait(timeout=wait_s))
        except subprocess.TimeoutExpired:
            return None

    def stderr_tail(self) -> str:
        try:
            self._errlog.seek(0, os.SEEK_END)
            size = self._errlog.tell()
            self._errlog.seek(max(size - 2000, 0))
            return self._errlog.read().decode("utf-8", "replace").strip() or "(no output)"
        except (OSError, ValueError, AttributeError):
            return "(no output)"

    def stop(self) -> None:
        self._finalizer()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def forget(self) -> None:
        # a forked child's copy: its finalizer would kill the parent's worker at the child's exit,
        # and its ends of the pipe would keep the parent's conversation open
        if self._finalizer.detach() is None:
            return  # forgotten or stopped already: the fds may be someone else's by now
        for fd in (self.channel.rfd, self.channel.wfd):
            try:
                os.close(fd)
            except OSError:
                pass
        # its stderr file stays open: a buffered file's lock may have been held by another thread
        # at the fork, and closing it here could wait for that lock forever

    stops_at_once = True

    def stop_nowait(self) -> None:
        # killed here, reaped and cleaned up on the reaper thread (the pool joins it at exit). The
        # task holds the worker itself: dropped by its host, it would otherwise be collected at
        # once, and its finalizer would do the whole clean-up right there, in the caller's thread.
        _kill(self.proc)
        _thread("reap").submit(self.stop)


FORK_SERVER = os.environ.get("RLMKIT_SANDBOX_FORK_SERVER", "1") != "0"  # "0": exec every worker
_fork_server: ForkServerClient | None = None


def _start(config: dict, env: dict[str, str], errlog) -> subprocess.Popen | ForkedProcess:
    """Start one worker (on the spawn thread): forked by the fork server, which is started on first
    use and again if it stopped; exec'd, as the fork server itself is, when there is none."""
    global _fork_server
    for _ in range(2 if FORK_SERVER else 0):
        if _fork_server is None or not _fork_server.alive:
            try:
                _fork_server = ForkServerClient(
                    WORKER, {k: v for k, v in env.items() if k not in ("HOME", "TMPDIR")}
                )
            except OSError:
                _fork_server = None
                break
        try:
            return _fork_server.spawn(config, [config["rfd"], config["wfd"], errlog.fileno()])
        except ForkServerGone:
            continue
    return subprocess.Popen(
        [sys.executable, "-I", "-S", WORKER, marshal.dumps(config).hex()],
        pass_fds=(config["rfd"], config["wfd"]),
        cwd=config["workdir"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=errlog,
        start_new_session=True,
    )


def standing_pids() -> set[int]:
    """Processes kept between runs: the fork server and the pool's idle workers (never given any
    code). A check that no worker outlived its run leaves these out."""
    server = _fork_server
    return pool.idle_pids() | ({server.proc.pid} if server is not None and server.alive else set())


class ProcessLauncher(Launcher):
    """Spawns ``worker_side/worker.py`` with ``python -I -S``; ``confine=False`` skips the OS
    confinement (tests only)."""

    def __init__(self, confine: bool = True):
        self.confine = confine

    def pool_key(self, limits: SandboxLimits) -> tuple:
        # what the worker is started with; the cell timeout and grace are the host's alone
        lim = limits
        return (
            type(self),
            sys.executable,
            os.geteuid(),
            self.confine,
            lim.network,
            lim.memory_bytes,
            lim.max_processes,
            lim.max_file_bytes,
            lim.max_disk_bytes,
            lim.max_output_chars,
        )

    def launch(self, limits: SandboxLimits) -> ProcessWorkerHandle:
        lim = limits
        workdir = tempfile.mkdtemp(prefix="rlmkit-repl-")
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        config = {
            "rfd": to_worker_r,
            "wfd": from_worker_w,
            "workdir": workdir,
            "host_pid": os.getpid(),
            "confine": self.confine,
            "network": lim.network,
            "memory_bytes": lim.memory_bytes,
            "max_processes": lim.max_processes,
            "max_file_bytes": lim.max_file_bytes,
            "max_disk_bytes": lim.max_disk_bytes,
            "max_output_chars": lim.max_output_chars,
            "read_only": [
                sys.base_prefix,
                sys.prefix,
                *SYSTEM_READ_ONLY,
                *(NETWORK_READ_ONLY if lim.network else []),
            ],
        }
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": workdir,
            "TMPDIR": workdir,
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
        }
        errlog = tempfile.TemporaryFile(prefix="rlmkit-repl-stderr-")  # noqa: SIM115 - lives as long as the worker
        try:
            proc = _thread("spawn").submit(_start, config, env, errlog).result()
        except BaseException:
            _kill_and_clean(None, [from_worker_r, to_worker_w], workdir, errlog)
            raise
        finally:
            os.close(to_worker_r)
            os.close(from_worker_w)
        channel = wire.Channel(from_worker_r, to_worker_w, max_frame=max_frame(lim))
        return ProcessWorkerHandle(proc, channel, [from_worker_r, to_worker_w], workdir, errlog)


class ProcessSandbox(WorkerHost):
    """A confined worker process per run. ``confine=False`` skips the OS confinement (tests only)."""

    name = "process"

    def __init__(
        self, limits: SandboxLimits | None = None, *, confine: bool = True, relaunch: Relaunch = Relaunch()
    ):
        super().__init__(limits, ProcessLauncher(confine), relaunch=relaunch)
        self.confine = confine

"""Host side: the host's client of the fork server (``worker_side/fork_server.py``), one per host
process, started on first use by path, as ``python -I -S worker_side/worker.py``.

``ProcessLauncher`` asks it for each new worker instead of exec'ing ``python worker.py``: a fork
of a clean interpreter that has the worker's modules loaded costs about a sixth of a start's CPU,
so many child RLMs starting at once, and a pool's refills, take little from the runs. The fork
server is the workers' parent, so it reaps them and reports how each ended; ``ForkedProcess``
reads that report as ``Popen`` reads its own child's status.
"""

from __future__ import annotations

import marshal
import os
import queue
import socket
import subprocess
import sys
import tempfile
import threading

SPAWN_TIMEOUT_S = 10.0


class ForkServerGone(OSError):
    """The fork server stopped (its workers die with it); a new one is started on the next spawn."""


class ForkServerClient:
    """The host's handle on a running fork server, and the thread that reads its replies."""

    def __init__(self, worker_script: str, env: dict[str, str]):
        host_end, server_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        config = {"fork_server": True, "sock": server_end.fileno(), "host_pid": os.getpid()}
        self._errlog = tempfile.TemporaryFile(prefix="rlmkit-forkserver-stderr-")  # noqa: SIM115
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-S", worker_script, marshal.dumps(config).hex()],
                pass_fds=(server_end.fileno(),),
                cwd="/",
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self._errlog,
                start_new_session=True,
            )
        finally:
            server_end.close()
        self._sock = host_end
        self._ask = threading.Lock()  # one request and its reply at a time
        self._spawned: queue.SimpleQueue[int | None] = queue.SimpleQueue()
        self._ended = threading.Condition()
        self._returncodes: dict[int, int] = {}
        self.alive = True
        threading.Thread(target=self._read, name="rlmkit-sandbox-forks", daemon=True).start()

    def spawn(self, config: dict, fds: list[int]) -> ForkedProcess:
        """Fork a worker with ``config`` and ``fds`` (its two pipe ends and its stderr file)."""
        with self._ask:
            if not self.alive:
                raise ForkServerGone("the sandbox fork server has stopped")
            try:
                socket.send_fds(self._sock, [marshal.dumps(config)], fds)
                pid = self._spawned.get(timeout=SPAWN_TIMEOUT_S)
            except (OSError, queue.Empty) as exc:
                self.close()
                raise ForkServerGone(
                    f"the sandbox fork server did not answer ({type(exc).__name__})"
                ) from None
            if pid is None:
                raise ForkServerGone("the sandbox fork server has stopped")
        return ForkedProcess(self, pid)

    def _read(self) -> None:
        while True:
            try:
                msg = self._sock.recv(4096)
            except OSError:
                msg = b""
            if not msg:
                break
            kind, pid, *rest = marshal.loads(msg)
            if kind == "spawned":
                self._spawned.put(pid)
            else:
                with self._ended:
                    self._returncodes[pid] = rest[0]
                    self._ended.notify_all()
        with self._ended:
            self.alive = False
            self._ended.notify_all()
        self._spawned.put(None)

    def returncode(self, process: ForkedProcess, timeout: float | None) -> int | None:
        """How ``process`` ended (as ``Popen.returncode``), waiting up to ``timeout`` seconds; a
        worker of a fork server that stopped was killed with it.

        The report is taken from the queue and kept on ``process`` under one lock: a thread that
        polls the worker (``alive()``) and one that waits for its kill to land may ask at once,
        and the one that asks second must find what the first one took, not wait for a report
        that will never come again."""
        with self._ended:
            self._ended.wait_for(lambda: self._ended_already(process), timeout)
            if process.returncode is None and process.pid in self._returncodes:
                process.returncode = self._returncodes.pop(process.pid)
            if process.returncode is None and not self.alive:
                process.returncode = -9
            return process.returncode

    def _ended_already(self, process: ForkedProcess) -> bool:
        return process.returncode is not None or process.pid in self._returncodes or not self.alive

    def close(self) -> None:
        """Stop the fork server: it ends when its socket closes, and its workers with it."""
        self.alive = False
        try:
            self._sock.close()
        except OSError:
            pass

    def forget(self) -> None:
        """In a forked host: the fork server is the parent's; only this copy of its socket closes."""
        self.alive = False
        self._sock.close()


class ForkedProcess:
    """What ``ProcessWorkerHandle`` needs of a ``Popen``, for a worker whose parent is the fork server."""

    def __init__(self, server: ForkServerClient, pid: int):
        self._server, self.pid, self.returncode = server, pid, None

    def poll(self) -> int | None:
        return self.wait(0) if self.returncode is None else self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        if self._server.returncode(self, timeout) is None and timeout not in (None, 0):
            raise subprocess.TimeoutExpired(f"sandbox worker {self.pid}", timeout)
        return self.returncode

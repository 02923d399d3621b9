"""The fork server: a forked worker is the same worker as an exec'd one, and a fork server that
stops takes its workers with it and is replaced on the next start."""

from __future__ import annotations

import os
import signal
import threading

import psutil
import pytest

from rlmkit.sandbox import SandboxLimits, pool, process
from rlmkit.sandbox.process import ProcessSandbox

# Every descriptor number is probed: an exec'd worker keeps its pipe ends' numbers from the host,
# which run high in a long-lived host (a test session), while a forked one gets them renumbered.
PROBE = (
    "import os, sys\n"
    "def is_open(fd):\n"
    "    try:\n        os.fstat(fd)\n        return True\n"
    "    except OSError:\n        return False\n"
    "print(sum(map(is_open, range(65536))), sorted(os.environ), os.environ['HOME'] == os.getcwd(),\n"
    "      len(sys.argv))"
)


@pytest.fixture(autouse=True)
def no_pool():
    size = pool.settings().size
    pool.configure(size=0)  # every start below is a fresh one
    yield
    pool.configure(size=size)
    process.FORK_SERVER = True


def started(forked: bool) -> ProcessSandbox:
    process.FORK_SERVER = forked
    sb = ProcessSandbox(SandboxLimits(cell_timeout=5.0))
    sb.start({"context": "x"}, {})
    return sb


def test_a_forked_worker_holds_what_an_execd_one_holds():
    execd, forked = started(False), started(True)
    try:
        assert psutil.Process(execd.pid).ppid() == os.getpid()
        assert psutil.Process(forked.pid).ppid() == process._fork_server.proc.pid
        seen = [sb.run(PROBE) for sb in (execd, forked)]
        assert seen[0].error is None and seen[0].stdout == seen[1].stdout, seen
        assert seen[0].stdout.startswith("5 ")  # stdin, stdout, stderr and its two pipe ends: no more
        assert forked.protection_notes == execd.protection_notes
    finally:
        execd.close()
        forked.close()


def test_a_stopped_fork_server_takes_its_workers_and_is_replaced():
    sb = started(True)
    server = process._fork_server
    worker = sb.pid
    os.kill(server.proc.pid, signal.SIGKILL)
    server.proc.wait()
    result = sb.run("print(context)")  # its worker died with the fork server: restarted from the inputs
    assert result.restarted and "killed by SIGKILL" in result.error
    assert _gone(worker)
    assert sb.run("print(context)").stdout == "x\n"
    assert process._fork_server is not server and process._fork_server.alive
    sb.close()


def test_a_worker_killed_while_another_thread_polls_it_is_seen_ended_by_both():
    """A session's idle stop kills its worker and waits for the kill to land while the caller
    polls ``alive()``: whichever of them takes the fork server's report first, the other must see
    the worker ended too, not wait for a report that never comes again."""
    for _ in range(20):
        sb = started(True)
        proc = sb._worker.proc
        waited: list[int | None] = []
        waiter = threading.Thread(target=lambda p=proc, w=waited: w.append(p.wait()), daemon=True)
        waiter.start()
        os.kill(proc.pid, signal.SIGKILL)
        while (polled := proc.poll()) is None:
            pass  # asking as fast as it can, as alive() does in a loop
        waiter.join(10)
        assert waited == [polled] == [-signal.SIGKILL], (waited, polled)
        sb.close()


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True

"""Worker side: the fork server itself, a clean interpreter (``worker.py`` started with
``fork_server`` in its config) that has imported the worker's modules once and forks a new
worker per request. Standard library only; the host's client of it is
``rlmkit/sandbox/fork_server_client.py``.

A worker started with ``python -I -S worker.py`` spends CPU on the interpreter and its modules
before its first confinement step; forked from this process it spends only the fork and its own
confinement, and shares its pages copy-on-write while it waits in a pool
(``benchmarks/sandbox/pool_cost.py`` measures both ways: ``benchmarks/results/pool_cost.json``).
The fork server itself is never confined (it must fork and unshare) and never runs model code:
it reads requests from its host and nothing else. Each forked worker leaves every file of the
fork server behind, starts a session of its own and confines itself exactly as an exec'd worker
does (``worker.run_worker``), before it says ``ready``.

Requests (one ``SOCK_SEQPACKET`` message each): a marshalled worker config, with three fds
attached (the worker's ends of its two pipes, its stderr file). Replies: ``("spawned", pid)``
per request, and ``("exited", pid, returncode)`` when a worker ends (this process is its parent,
so only it can reap it and read its status).
"""

from __future__ import annotations

import marshal
import os
import signal
import sys


def serve(config: dict, run_worker) -> None:
    import select
    import socket

    if __package__:  # read as part of rlmkit (the type checker); the worker imports it by bare name
        from . import confine
    else:
        import confine

    sock = socket.socket(fileno=config["sock"])
    confine.die_with_parent(config["host_pid"])  # its workers die with it in turn (their own PDEATHSIG)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # only to wake the select below
    while True:
        readable = select.select([sock, wake_r], [], [])[0]
        if wake_r in readable:
            os.read(wake_r, 4096)
            _report_exits(sock)
        if sock not in readable:
            continue
        msg, fds, _, _ = socket.recv_fds(sock, 1 << 16, 3)
        if not msg:
            return  # the host is gone: so are we, and our workers with us
        worker_config = marshal.loads(msg)
        pid = os.fork()
        if pid == 0:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            for fd in (sock.detach(), wake_r, wake_w):
                os.close(fd)
            os._exit(_become_worker(worker_config, fds, run_worker))
        for fd in fds:
            os.close(fd)
        sock.send(marshal.dumps(("spawned", pid)))


def _become_worker(config: dict, fds: list[int], run_worker) -> int:
    """In the forked child: what ``subprocess.Popen`` did for an exec'd worker, then its main."""
    os.setsid()
    os.dup2(fds[2], 2)
    os.close(fds[2])
    config["rfd"], config["wfd"] = fds[0], fds[1]
    config["host_pid"] = os.getppid()  # die with the fork server, which dies with the host
    os.environ["HOME"] = os.environ["TMPDIR"] = config["workdir"]
    sys.argv = [sys.argv[0], marshal.dumps(config).hex()]  # as an exec'd worker's
    try:
        run_worker(config)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - reported on its stderr, as an exec'd worker's would be
        import traceback

        traceback.print_exc()
        return 1
    finally:
        sys.stderr.flush()
    return 0


def _report_exits(sock) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        sock.send(marshal.dumps(("exited", pid, os.waitstatus_to_exitcode(status))))

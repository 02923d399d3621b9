"""Hostile code straight against the process sandbox.

Every case in ``rlmkit.testing.hostile_cases`` must be contained (its check passes), leave the
host's bait untouched (``HostileEnv.harm()`` is empty), be contained in bounded time, and leave
a sandbox that still answers the next cell with the run's inputs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil
import pytest

from rlmkit.sandbox import SandboxLimits, pool, process
from rlmkit.sandbox.process import ProcessLauncher, ProcessSandbox
from rlmkit.sandbox.worker_side.confine import landlock_abi
from rlmkit.testing.hostile_cases import ENV_SECRET, HOSTILE_CASES, SECRET_TEXT, HostileEnv

CELL_TIMEOUT = 2.0
GRACE = 0.5
LIMITS = SandboxLimits(
    cell_timeout=CELL_TIMEOUT, interrupt_grace=GRACE, max_disk_bytes=64 * 1024**2, memory_bytes=2 * 1024**3
)


@pytest.fixture(scope="module")
def env():
    with HostileEnv() as bait:
        yield bait


@pytest.fixture(scope="module", params=["exec", "forked", "pooled"])
def sandbox(env, request):
    """Every case runs against a worker exec'd for the run (the fallback when there is no fork
    server), one forked for the run by the fork server, and one that waited in the pool before
    the run existed: each must be exactly as confined as the others."""
    size = pool.settings().size
    if request.param == "pooled":
        ProcessLauncher().prewarm(LIMITS)
        assert pool.wait_idle(size, 30, ProcessLauncher().pool_key(LIMITS))
    else:
        pool.configure(size=0)
    process.FORK_SERVER = request.param != "exec"
    idle = pool.idle_pids()
    sb = ProcessSandbox(LIMITS)
    try:
        sb.start({"context": "the inputs"}, {})  # inside HostileEnv: the env secret exists on the host
    finally:
        pool.configure(size=size)
        process.FORK_SERVER = True
    assert (sb.pid in idle) == (request.param == "pooled")
    assert (psutil.Process(sb.pid).ppid() != os.getpid()) == (request.param != "exec")  # forked: not ours
    yield sb
    sb.close()


@pytest.mark.parametrize("case", HOSTILE_CASES, ids=[c.name for c in HOSTILE_CASES])
def test_hostile_case_is_contained(case, sandbox, env):
    host_pid = os.getpid()
    t0 = time.monotonic()
    result = sandbox.run(case.code(env))
    contain_s = time.monotonic() - t0
    outcome = case.check(result, env)
    assert env.harm() == []
    assert os.getpid() == host_pid
    # Bounded: the timeout plus the grace plus a restart, with room for a loaded CI machine.
    assert contain_s < CELL_TIMEOUT + GRACE + 3.0, f"{case.name} took {contain_s:.2f}s ({outcome})"
    after = sandbox.run("print(context)")
    assert after.stdout == "the inputs\n", f"sandbox unusable after {case.name}: {after.error}"


def test_host_environment_is_not_inherited(sandbox, env):
    assert os.environ[ENV_SECRET] == SECRET_TEXT
    result = sandbox.run(f"import os\nprint(sorted(os.environ), os.environ.get({ENV_SECRET!r}))")
    assert SECRET_TEXT not in result.stdout
    assert ENV_SECRET not in result.stdout


def _namespaces_allowed() -> bool:
    """Whether this machine lets this process make new network and mount namespaces (root
    directly, anyone else through a user namespace; containers and some distributions refuse),
    probed in a throwaway child so this process keeps its own."""
    flags = 0x40000000 | 0x20000 | (0 if os.geteuid() == 0 else 0x10000000)  # NEWNET | NEWNS | NEWUSER
    probe = f"import ctypes, os\nos._exit(0 if ctypes.CDLL(None).unshare({flags}) == 0 else 1)"
    return subprocess.run([sys.executable, "-c", probe], check=False).returncode == 0


def test_every_protection_this_machine_offers_is_on(sandbox):
    notes = sandbox.protection_notes
    # These need only a Linux kernel with seccomp and rlimits; the others are reported, not assumed.
    assert notes["seccomp"] is True and notes["rlimits"] is True and notes["die_with_host"] is True
    if landlock_abi() >= 1:
        assert notes["landlock_fs"] is True
    if os.geteuid() == 0:  # the worker becomes a uid of its own ...
        assert notes["own_uid"] is True
    else:  # ... or stays this user, and gets its namespaces through a user namespace
        assert notes["own_uid"] == "off: host is not root"
    if _namespaces_allowed():
        assert notes["network_namespace"] is True, notes
        assert notes["mount_namespace"] is True and notes["workdir_tmpfs"] is True, notes


def _namespace(pid: int | str, kind: str) -> str:
    return os.readlink(f"/proc/{pid}/ns/{kind}")


@pytest.fixture
def fresh_sandbox():
    with ProcessSandbox(LIMITS) as sb:
        sb.start({}, {})
        yield sb


def test_worker_identity_per_privilege_level(fresh_sandbox):
    """As root the worker is a uid of its own; otherwise it is this user inside a user namespace
    of its own. Either way it has no network and no view of the host's mounts."""
    sandbox = fresh_sandbox
    worker = psutil.Process(sandbox.pid)
    if os.geteuid() == 0:
        assert worker.uids().real == worker.uids().effective == 1_000_000 + sandbox.pid
        assert worker.gids().real == 1_000_000 + sandbox.pid
    else:
        assert worker.uids().effective == os.geteuid()
        if _namespaces_allowed():
            assert _namespace(sandbox.pid, "user") != _namespace("self", "user")
    if sandbox.protection_notes["network_namespace"] is True:
        assert _namespace(sandbox.pid, "net") != _namespace("self", "net")
        assert _namespace(sandbox.pid, "mnt") != _namespace("self", "mnt")
    home = sandbox.run("import os\nprint(os.environ['HOME'] == os.getcwd(), os.listdir('.'))")
    assert home.stdout == "True []\n", home  # a scratch home of its own, empty at the start


def test_no_worker_outlives_close(env):
    sb = ProcessSandbox(LIMITS)
    sb.start({}, {})
    pids = [sb.pid]
    sb.run("import os\nos._exit(0)")  # one restart: two workers over the sandbox's life
    pids.append(sb.pid)
    sb.close()
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_worker_survives_the_thread_that_started_it():
    # The RLM starts sandboxes from short-lived threads; PR_SET_PDEATHSIG fires when the
    # *thread* that forked a process exits, so workers are forked from one long-lived thread.
    import threading

    sb = ProcessSandbox(LIMITS)
    starter = threading.Thread(target=sb.start, args=({"context": "abc"}, {}))
    starter.start()
    starter.join()
    time.sleep(0.2)
    try:
        assert sb.run("context").stdout == "'abc'\n"
    finally:
        sb.close()


def test_worker_dies_with_its_host(tmp_path):
    import signal
    import subprocess
    import sys

    script = (
        "import sys, time\nfrom rlmkit.sandbox.process import ProcessSandbox\n"
        "sb = ProcessSandbox()\nsb.start({}, {})\nprint(sb.pid, flush=True)\ntime.sleep(60)\n"
    )
    host = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        text=True,
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    )
    try:
        worker_pid = int(host.stdout.readline())
        os.kill(worker_pid, 0)  # alive while its host lives
        host.send_signal(signal.SIGKILL)
        host.wait()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                os.kill(worker_pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the worker outlived its killed host")
    finally:
        host.kill()
        host.wait()


def test_network_flag_opens_the_network(env):
    before = env.connections
    sb = ProcessSandbox(SandboxLimits(cell_timeout=5.0, network=True))
    sb.start({}, {})
    try:
        result = sb.run(
            f"import socket\nsocket.create_connection(('127.0.0.1', {env.port}), timeout=2).close()"
        )
        assert result.error is None, result.error
        deadline = time.monotonic() + 2
        while env.connections == before and time.monotonic() < deadline:
            time.sleep(0.02)
        assert env.connections == before + 1
    finally:
        env.connections = before  # the bait counts hostile connections only
        sb.close()

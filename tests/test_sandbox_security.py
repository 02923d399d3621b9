"""Hostile code straight against the process sandbox (issue 10, section 1).

Every case in ``rlmkit.testing.hostile_cases`` must be contained (its check passes), leave the
host's bait untouched (``HostileEnv.harm()`` is empty), be contained in bounded time, and leave
a sandbox that still answers the next cell with the run's inputs.
"""

from __future__ import annotations

import os
import time

import pytest

from rlmkit.sandbox import SandboxLimits, pool
from rlmkit.sandbox.process import ProcessLauncher, ProcessSandbox
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


@pytest.fixture(scope="module", params=["fresh", "pooled"])
def sandbox(env, request):
    """Every case runs against a worker started for the run and against one that waited in the
    pool before the run existed: a pooled worker must be exactly as confined."""
    size = pool.settings().size
    if request.param == "fresh":
        pool.configure(size=0)
    else:
        ProcessLauncher().prewarm(LIMITS)
        assert pool.wait_idle(size, 30, ProcessLauncher().pool_key(LIMITS))
    idle = pool.idle_pids()
    sb = ProcessSandbox(LIMITS)
    try:
        sb.start({"context": "the inputs"}, {})  # inside HostileEnv: the env secret exists on the host
    finally:
        pool.configure(size=size)
    assert (sb.pid in idle) == (request.param == "pooled")
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


def test_every_protection_this_machine_offers_is_on(sandbox):
    notes = sandbox.protection_notes
    # These need only a Linux kernel with seccomp and rlimits; the others are reported, not assumed.
    assert notes["seccomp"] is True and notes["rlimits"] is True
    if os.geteuid() == 0:
        assert notes["own_uid"] is True


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
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
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

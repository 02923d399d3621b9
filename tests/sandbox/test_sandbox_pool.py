"""The pool of pre-started workers: taken once, never shared, bounded, refilled, reaped, fork- and
thread-safe, and as confined as a fresh worker."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import threading

import psutil
import pytest

from rlmkit.errors import ConfigError
from rlmkit.sandbox import SandboxLimits, pool
from rlmkit.sandbox.process import ProcessLauncher, ProcessSandbox
from tests.helpers.waiting import wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_unique = itertools.count(1)


@pytest.fixture
def limits():
    """Limits of a configuration no other test uses: a pool of this test's own."""
    return SandboxLimits(cell_timeout=5.0, max_output_chars=10_000 + next(_unique))


@pytest.fixture(autouse=True)
def restore_settings():
    before = pool.settings()
    yield
    pool.configure(size=before.size, idle_s=before.idle_s)


def warm(limits: SandboxLimits, count: int | None = None) -> set[int]:
    """Fill the pool for ``limits`` and return its idle workers' pids."""
    launcher = ProcessLauncher()
    launcher.prewarm(limits)
    assert pool.wait_idle(count or pool.settings().size, 30, launcher.pool_key(limits))
    return pool.idle_pids()


def started(limits: SandboxLimits, variables: dict | None = None) -> ProcessSandbox:
    sb = ProcessSandbox(limits)
    sb.start(variables or {"context": "x"}, {})
    return sb


def test_a_run_takes_a_pooled_worker_and_its_inputs_cross_at_the_take(limits):
    idle = warm(limits)
    sb = started(limits, {"context": "the run's own input", "n": 42})
    try:
        assert sb.pid in idle  # started before the run's inputs existed
        assert sb.run("print(context, n)").stdout == "the run's own input 42\n"
        assert sb.pid not in pool.idle_pids()  # it is this run's now
    finally:
        sb.close()


def test_nothing_of_one_run_reaches_the_next(limits):
    pool.configure(size=1)
    warm(limits)
    leak = (
        "secret = 'run one'\n"
        "open('note.txt', 'w').write('run one')\n"
        "import os, re, sys\n"
        "os.environ['LEAK'] = 'run one'\n"
        "re.LEAK = 'run one'\n"
        "sys.modules['leak'] = re\n"
    )
    first = started(limits, {"context": "one"})
    first.run(leak)
    pids = [first.pid]
    first.close()
    for _ in range(3):
        assert pool.wait_idle(1, 30, ProcessLauncher().pool_key(limits))
        nxt = started(limits, {"context": "two"})
        try:
            probe = nxt.run(
                "import os, re, sys\n"
                "print(globals().get('secret'), os.path.exists('note.txt'), os.environ.get('LEAK'),\n"
                "      getattr(re, 'LEAK', None), 'leak' in sys.modules, context)"
            )
            assert probe.stdout == "None False None None False two\n", probe
            assert nxt.pid not in pids  # a worker that ran code is never handed out again
            pids.append(nxt.pid)
            nxt.run(leak)
        finally:
            nxt.close()
        assert pids[-1] not in pool.idle_pids()


def test_a_pooled_worker_is_as_confined_as_a_fresh_one(limits):
    pool.configure(size=0)  # off: a fresh worker
    fresh = started(limits)
    pool.configure(size=2)
    idle = warm(limits)
    pooled = started(limits)
    try:
        assert pooled.pid in idle and fresh.pid not in idle
        assert pooled.protection_notes == fresh.protection_notes
        probe = "import os\nprint(os.getuid() == os.getpid() + 1_000_000 if os.getuid() else 'root')"
        assert pooled.run(probe).stdout == fresh.run(probe).stdout
        if os.geteuid() == 0:
            assert pooled.run(probe).stdout == "True\n"  # its own uid, from its own pid
    finally:
        fresh.close()
        pooled.close()


def test_the_pool_is_bounded_refilled_and_emptied_when_idle(limits):
    pool.configure(size=2)
    key = ProcessLauncher().pool_key(limits)
    sandboxes = [started(limits) for _ in range(5)]  # more than the pool holds: the rest are fresh
    try:
        assert pool.wait_idle(2, 30, key)  # refilled in the background, up to its size
        assert all(sb.run("print(context)").stdout == "x\n" for sb in sandboxes)
        assert pool._idle_now(key) == 2
    finally:
        for sb in sandboxes:
            sb.close()
    pool.configure(size=1)  # shrinking stops the extra idle worker now
    assert pool._idle_now(key) == 1
    gone = pool.idle_pids()
    pool.configure(idle_s=0.2)
    wait_for(lambda: pool._idle_now(key) == 0)
    wait_for(lambda: not any(psutil.pid_exists(p) and _running(p) for p in gone))


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_size_zero_turns_the_pool_off(limits):
    pool.configure(size=0)
    before = pool.stats()
    sb = started(limits)
    sb.close()
    assert pool.stats()["taken"] == before["taken"]
    assert pool._idle_now(ProcessLauncher().pool_key(limits)) == 0


def test_bad_settings_are_config_errors():
    for bad in ({"size": -1}, {"size": 1.5}, {"idle_s": 0}, {"idle_s": "soon"}):
        with pytest.raises(ConfigError):
            pool.configure(**bad)


def test_a_pooled_worker_that_died_while_idle_is_skipped(limits):
    pool.configure(size=1)
    (victim,) = warm(limits) & set(_pids_of(limits))
    os.kill(victim, 9)
    wait_for(lambda: not _running(victim))
    sb = started(limits)
    try:
        assert sb.pid != victim and sb.run("print(context)").stdout == "x\n"
    finally:
        sb.close()


def _pids_of(limits: SandboxLimits) -> list[int]:
    with pool._lock:
        return [w.pid for _, w in pool._pools[ProcessLauncher().pool_key(limits)]._idle]


def test_threads_starting_at_once_never_share_a_worker(limits):
    pool.configure(size=3)
    warm(limits)
    seen: list[tuple[int, str]] = []
    errors: list[BaseException] = []

    def one_run(i: int) -> None:
        try:
            for j in range(3):
                with ProcessSandbox(limits) as sb:
                    sb.start({"context": f"{i}-{j}"}, {})
                    seen.append((sb.pid, sb.run("print(context)").stdout))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=one_run, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert len(seen) == 18 and len({pid for pid, _ in seen}) == 18
    assert sorted(out for _, out in seen) == sorted(f"{i}-{j}\n" for i in range(6) for j in range(3))


FORKING_HOST = """
import os, sys
from rlmkit.sandbox import SandboxLimits, pool
from rlmkit.sandbox.process import ProcessLauncher, ProcessSandbox
limits = SandboxLimits(cell_timeout=5.0)
ProcessLauncher().prewarm(limits)
assert pool.wait_idle(2, 30)
idle = pool.idle_pids()
in_use = ProcessSandbox(limits)
in_use.start({"context": "parent"}, {})
child = os.fork()
if child == 0:  # owns none of its parent's workers; starts its own; then exits the normal way
    assert pool.idle_pids() == set()
    with ProcessSandbox(limits) as sb:
        sb.start({"context": "child"}, {})
        assert sb.run("print(context)").stdout == "child\\n" and sb.pid not in idle
    sys.exit(0)
assert os.waitpid(child, 0)[1] == 0, "the child failed"
assert in_use.run("print(context)").stdout == "parent\\n"
assert idle <= pool.idle_pids() | {in_use.pid}, "the child's exit stopped its parent's idle workers"
taken = ProcessSandbox(limits)
taken.start({"context": "after"}, {})
assert taken.pid in idle and taken.run("print(context)").stdout == "after\\n"
print("ok")
"""


def test_a_forked_child_leaves_its_parents_workers_alone():
    """A forked host (``os.fork``, multiprocessing's fork) starts with an empty pool and no fork
    server, starts workers of its own, and exits without stopping its parent's workers."""
    done = subprocess.run(
        [sys.executable, "-c", FORKING_HOST],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": ROOT, "RLMKIT_POOL_SIZE": "2"},
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


HOST = """
import sys
from rlmkit.sandbox import pool
from rlmkit.sandbox.process import ProcessLauncher, ProcessSandbox
from rlmkit.sandbox.base import SandboxLimits
sb = ProcessSandbox()
sb.start({}, {})
assert pool.wait_idle(pool.settings().size, 30)
with pool._lock:
    workers = [w for p in pool._pools.values() for _, w in p._idle]
print(*[w.pid for w in workers], *[w.workdir for w in workers], flush=True)
sys.stdin.readline()  # "exit": the test has seen the workers and closes stdin; the host exits
if sys.argv[1] == "hang":
    sys.stdin.read()
"""


@pytest.mark.parametrize("how", ["exit", "killed"])
def test_idle_workers_are_reaped_when_their_host_ends(how):
    host = subprocess.Popen(
        [sys.executable, "-c", HOST, "exit" if how == "exit" else "hang"],
        stdout=subprocess.PIPE,
        stdin=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": ROOT, "RLMKIT_POOL_SIZE": "2"},
    )
    try:
        fields = host.stdout.readline().split()
        pids, workdirs = [int(f) for f in fields[:2]], fields[2:]
        assert len(workdirs) == 2 and all(map(os.path.isdir, workdirs))
        if how == "killed":
            host.kill()
        else:
            host.stdin.close()  # the host exits only now: its clean-up cannot race the check above
        assert host.wait(30) == (0 if how == "exit" else -9)
        wait_for(lambda: not any(map(_running, pids)))
        if how == "exit":  # a killed host cannot clean up; its workers still die with it
            assert not any(map(os.path.exists, workdirs))
    finally:
        host.kill()
        host.wait()

"""rlmkit.concurrency.threads: blocking work runs on reused threads, and never waits behind a busy one."""

from __future__ import annotations

import threading
import time

from rlmkit.concurrency.threads import ReusedThreads


def _run(pool: ReusedThreads, fn) -> threading.Event:
    done = threading.Event()

    def job():
        fn()
        done.set()

    pool.submit(job)
    return done


def test_a_finished_thread_takes_the_next_job():
    pool = ReusedThreads("test-reuse")
    names = []
    for _ in range(5):
        assert _run(pool, lambda: names.append(threading.get_ident())).wait(10)
        deadline = time.monotonic() + 10
        while pool._idle == 0 and time.monotonic() < deadline:  # wait until it is idle again
            time.sleep(0.001)
    assert pool.started == 1 and len(set(names)) == 1


def test_a_job_never_waits_behind_a_busy_thread():
    """A nested RLM blocks its thread until its children's cells ran: they need threads too."""
    pool = ReusedThreads("test-nested")
    child_ran = threading.Event()
    parent = _run(pool, lambda: child_ran.wait(10))  # blocks until the child ran
    child = _run(pool, child_ran.set)
    assert child.wait(10) and parent.wait(10)
    assert pool.started == 2


def test_idle_threads_exit():
    pool = ReusedThreads("test-idle-exit", idle_exit_s=0.05)
    assert _run(pool, lambda: None).wait(10)
    deadline = time.monotonic() + 10
    while any(t.name == "test-idle-exit" for t in threading.enumerate()):
        assert time.monotonic() < deadline, "an idle thread did not exit"
        time.sleep(0.01)
    assert _run(pool, lambda: None).wait(10)  # and a new one serves the next job
    assert pool.started == 2

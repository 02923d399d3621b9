"""A sandbox backend on the worker host is a launcher and one registry line."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from importlib.util import find_spec

import pytest

import rlmkit
from rlmkit.errors import BudgetExceeded
from rlmkit.sandbox import BACKENDS, make_sandbox
from rlmkit.sandbox.base import AsyncHostFunction, SandboxLimits
from rlmkit.sandbox.host import Launcher, WorkerHost
from rlmkit.sandbox.process import ProcessLauncher
from rlmkit.sandbox.worker_side import wire
from tests.helpers.replies import repl
from tests.helpers.script import Script

LAUNCHES: list[str] = []


class CountingLauncher(Launcher):
    """A stand-in for a container or remote launcher: it starts an unconfined local worker."""

    def launch(self, limits):
        LAUNCHES.append("launch")
        return ProcessLauncher(confine=False).launch(limits)


class CountingSandbox(WorkerHost):
    def __init__(self, limits=None):
        super().__init__(limits, CountingLauncher())


def test_a_new_launcher_runs_an_rlm_through_the_shared_worker_host(monkeypatch, serve):
    monkeypatch.setitem(BACKENDS, "counting", f"{__name__}:CountingSandbox")
    LAUNCHES.clear()
    assert isinstance(make_sandbox("counting"), CountingSandbox) and LAUNCHES == []  # launched at start()
    _, lm = serve(Script([repl("n = len(context)", "SUBMIT(answer=str(n))")]))
    prediction = rlmkit.RLM("context -> answer", lm=lm, sandbox="counting")(context="abcd")
    assert prediction.answer == "4" and LAUNCHES == ["launch"]
    assert prediction.trajectory.meta.sandbox == "counting"


@pytest.mark.parametrize(
    "backend", ["process", "inline"] + (["monty"] if find_spec("pydantic_monty") else [])
)
def test_every_backend_ends_the_run_on_a_host_functions_run_error(backend):
    """The one route for a fatal sub-call error: the host function raises it, the cell stops (the
    model's own ``except Exception`` cannot keep it going) and ``run()`` raises it on the host."""
    calls = []

    def spend(prompt):
        calls.append(prompt)
        raise BudgetExceeded("calls spent", kind="calls", limit=1, used=1)

    with make_sandbox(backend) as sandbox:
        sandbox.start({}, {"llm_query": spend})
        code = "for i in range(3):\n    try:\n        llm_query(str(i))\n    except Exception:\n        pass"
        with pytest.raises(BudgetExceeded):
            sandbox.run(code)
    assert calls == ["0"]


def test_the_default_sandbox_awaits_a_host_coroutine_on_the_loop_and_a_plain_function_on_a_thread():
    """``arun_then`` drives the worker's pipe from the event loop: a host function's coroutine form
    runs there, in place (no thread hand-over per sub-call); a plain function, which may block
    (a user's tool), runs on a thread; the plain form of an ``AsyncHostFunction`` is not used."""
    ran: dict[str, int] = {}

    async def ask(prompt):
        ran["ask"] = threading.get_ident()
        return f"re: {prompt}"

    def never(*args):
        raise AssertionError("the loop-driven sandbox called the plain form")

    def tool(x):
        ran["tool"] = threading.get_ident()
        return x * 2

    async def main():
        ran["loop"] = threading.get_ident()
        with make_sandbox("process") as sandbox:
            sandbox.start({}, {"ask": AsyncHostFunction(never, ask), "tool": tool})
            return await sandbox.arun_then("print(ask('hi'), tool(21))", "print('after')")

    result = asyncio.run(main())
    assert result.error is None and result.stdout == "re: hi 42\nafter\n"
    assert ran["ask"] == ran["loop"] and ran["tool"] != ran["loop"]


def test_the_loop_driven_cell_times_out_interrupts_and_restarts_like_the_threaded_one():
    """The cell's conversation is one generator for both drivers: on the loop, a cell past its
    timeout is interrupted (variables kept), and one that ignores the interrupt is restarted."""
    limits = SandboxLimits(cell_timeout=0.5, interrupt_grace=0.3)

    async def main():
        with make_sandbox("process", limits) as sandbox:
            sandbox.start({"n": 1}, {})
            await sandbox.arun_then("n = 2", "pass")
            slow = await sandbox.arun_then("while True: pass", "pass")
            kept = await sandbox.arun_then("print(n)", "pass")
            deaf = await sandbox.arun_then(
                "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass", "pass"
            )
            reset = await sandbox.arun_then("print(n)", "pass")
            return slow, kept, deaf, reset

    slow, kept, deaf, reset = asyncio.run(main())
    assert slow.timed_out and not slow.restarted and "time limit" in slow.error
    assert kept.stdout == "2\n"
    assert deaf.timed_out and deaf.restarted and "did not stop when interrupted" in deaf.error
    assert reset.stdout == "1\n"


def test_a_frame_read_in_pieces_from_the_loop_is_whole_only_once_all_of_it_arrived():
    r, w = os.pipe()
    try:
        chan = wire.Channel(r, w)
        frame = wire.HEADER.pack(5) + b"hello"
        os.write(w, frame[:6])
        chan.fill()
        assert chan.take_frame() is None
        os.write(w, frame[6:] + wire.HEADER.pack(0))
        chan.fill()
        assert chan.take_frame() == b"hello" and chan.take_frame() == b""
        chan.send_bytes(b"x" * 3)  # a frame goes out whole, header and payload in one write
        assert os.read(r, 100) == wire.HEADER.pack(3) + b"xxx"
    finally:
        os.close(r)
        os.close(w)


def test_a_channel_waits_on_a_descriptor_numbered_above_what_select_accepts():
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2100:
        pytest.skip(f"the hard limit on open files is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 2100), hard))
    r, w = os.pipe()
    high = os.dup2(r, 2000)  # as a host holding two thousand descriptors would
    try:
        chan = wire.Channel(high, w)
        with pytest.raises(wire.ChannelTimeout):
            chan.recv_frame(deadline=time.monotonic() + 0.05)
        chan.send_bytes(b"ok")
        assert chan.recv_frame(deadline=time.monotonic() + 30) == b"ok"
    finally:
        for fd in (high, r, w):
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

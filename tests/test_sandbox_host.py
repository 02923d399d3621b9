"""A sandbox backend on the worker host is a launcher and one registry line."""

from __future__ import annotations

import rlmkit
from rlmkit.sandbox import BACKENDS, make_sandbox
from rlmkit.sandbox.host import Launcher, WorkerHost
from rlmkit.sandbox.process import ProcessLauncher
from tests.conftest import Script
from tests.test_rlm import repl

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

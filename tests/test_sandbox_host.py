"""A sandbox backend on the worker host is a launcher and one registry line."""

from __future__ import annotations

from importlib.util import find_spec

import pytest

import rlmkit
from rlmkit.errors import BudgetExceeded
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

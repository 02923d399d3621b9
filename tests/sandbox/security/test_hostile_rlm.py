"""Hostile code through the whole RLM.

``tests/sandbox/test_sandbox_security.py`` throws each hostile case at the sandbox directly. Here a
scripted root model emits the case as its code, through the real ``rlmkit.RLM`` with the
default (process) sandbox, and on its second turn SUBMITs ``len(context)``. For every case:

- the run goes on and the model is told what happened (the next prompt carries the error,
  the timeout or the restart), or the run ends with a typed ``rlmkit.errors`` error;
- the case's own containment check passes on the trajectory's record of the cell;
- the host is unharmed: same process, the bait files intact, no connection to the listener,
  no secret in any prompt or trajectory, no stray file in the host's working dir, no worker
  process left behind;
- the REPL still has the run's inputs afterwards (the SUBMIT computes ``len(context)`` there).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import psutil
import pytest

import rlmkit
from rlmkit.errors import RLMKitError
from rlmkit.prompting import Display
from rlmkit.sandbox.base import CellResult, SandboxLimits
from rlmkit.sandbox.process import standing_pids
from rlmkit.testing.hostile_cases import HOSTILE_CASES, SECRET_TEXT, HostileEnv
from tests.helpers.script import Script

CELL_TIMEOUT = 2.0  # the RLM's knob
# Every other sandbox limit is the default, but for a 64 MiB working dir (not 512 MiB), so
# filling it ends within the short cell timeout on a loaded 2-core CI machine.
LIMITS = SandboxLimits(max_disk_bytes=64 * 1024**2)
CONTEXT = "the run's inputs " * 10
SUBMIT = "```repl\nSUBMIT(answer=len(context))\n```"
# The trajectory keeps what the sandbox returned whole (its own cut is 1M chars), so the
# case's check sees the same output the sandbox produced.
DISPLAY = Display(trajectory_chars=1_100_000)


@pytest.fixture(scope="module")
def env():
    with HostileEnv() as bait:
        yield bait


def _cell(block) -> CellResult:
    """The sandbox's cell result, rebuilt from the trajectory's record of the code block."""
    return CellResult(
        stdout=block.stdout,
        stderr=block.stderr,
        error=block.error,
        timed_out=block.timed_out,
        restarted=block.restarted,
        duration_s=block.duration_s,
    )


def _what_the_model_must_hear(block) -> str:
    """A phrase the next prompt must contain so the model knows what its code did."""
    if block.restarted:
        return "restarted"
    if block.timed_out:
        return "time limit"
    if block.error:
        return block.error.strip().splitlines()[-1].split(":", 1)[0]
    return "characters cut"  # the one case with no error: output cut head + tail


def _running_children(host: psutil.Process, before: set[int], timeout: float = 5.0) -> set[int]:
    """Children beyond ``before`` still running code. A run ends by SIGKILLing its worker's process
    group and has it reaped in the background, so the kernel gets a moment to finish the kill. The
    sandbox's standing processes (its fork server, its pool's idle workers) do not count."""
    deadline = time.monotonic() + timeout
    while True:
        running, idle = set(), standing_pids()
        for child in host.children(recursive=True):
            try:
                if child.pid not in before | idle and child.status() != psutil.STATUS_ZOMBIE:
                    running.add(child.pid)
            except psutil.NoSuchProcess:
                pass
        if not running or time.monotonic() > deadline:
            return running
        time.sleep(0.05)


def _stray_files(before: set[str]) -> set[str]:
    return set(os.listdir(".")) - before


@pytest.mark.parametrize("case", HOSTILE_CASES, ids=[c.name for c in HOSTILE_CASES])
def test_hostile_code_from_the_root_model_is_contained(case, env, serve, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the host's cwd, private to this test: any new file in it is the case's
    host = psutil.Process()
    children_before = {p.pid for p in host.children(recursive=True)}
    cwd_before = set(os.listdir("."))
    server, lm = serve(Script([f"```repl\n{case.code(env)}\n```", SUBMIT]))
    rlm = rlmkit.RLM(
        "context -> answer: int",
        lm=lm,
        cell_timeout=CELL_TIMEOUT,
        max_iterations=3,
        limits=LIMITS,
        display=DISPLAY,
    )

    t0 = time.monotonic()
    try:
        pred = rlm(context=CONTEXT)
    except RLMKitError as exc:  # ending is allowed, but only with a typed error and the trajectory kept
        trajectory, ended = exc.trajectory, type(exc).__name__
        assert trajectory is not None, f"{case.name}: {ended} without a trajectory"
    else:
        trajectory, ended = pred.trajectory, None
        assert pred.answer == len(CONTEXT), f"{case.name}: the REPL lost its inputs"
    run_s = time.monotonic() - t0

    block = trajectory.turns[0].blocks[0]
    outcome = case.check(_cell(block), env)
    # contained in bounded time: the cell timeout, the interrupt grace and a restart, with CI slack
    grace = rlm.limits.interrupt_grace
    assert block.duration_s < CELL_TIMEOUT + grace + 3.0, (
        f"{case.name} took {block.duration_s:.2f}s ({outcome})"
    )

    if ended is None:  # the run went on: the model was told what happened, in the next prompt
        heard = _what_the_model_must_hear(block)
        assert heard in trajectory.turns[0].feedback, f"{case.name}: feedback lacks {heard!r}"
        second_root_request = [r for r in server.requests if r["messages"][0]["role"] == "system"][1]
        assert second_root_request["messages"][-1]["content"] == trajectory.turns[0].feedback

    # the host is unharmed
    assert env.harm() == [], case.name
    assert host.is_running() and os.getpid() == host.pid
    everything_sent = json.dumps(server.requests) + trajectory.model_dump_json()
    assert SECRET_TEXT not in everything_sent, f"{case.name}: the secret reached the model or the log"
    assert not _stray_files(cwd_before), f"{case.name} left {_stray_files(cwd_before)} in the host's cwd"
    leftover = _running_children(host, children_before)
    assert not leftover, f"{case.name}: worker processes outlived the run: {leftover}"
    print(
        f"\n{case.name}: {outcome}; contained in {block.duration_s:.2f}s; run {run_s:.2f}s; "
        f"{'ended ' + ended if ended else 'run went on'}"
    )


def test_the_bait_is_live(env):
    """The checks above can fail: the same code outside any sandbox does reach the bait."""
    import socket

    assert Path(env.secret).read_text() == SECRET_TEXT
    before = env.connections
    socket.create_connection(("127.0.0.1", env.port), timeout=2).close()
    deadline = time.monotonic() + 2
    while env.connections == before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert env.harm() == ["the 127.0.0.1 listener saw 1 connection(s)"]
    env.connections = before

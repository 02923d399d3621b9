"""Faults in the middle of a run, and what is left afterwards (nothing finished is lost).

- the model server is killed mid-request and restarted: the run retries within its budget and
  finishes; left down, the run ends with a typed ``LMError`` that carries its finished turns;
- the log directory's disk fills: the run goes on, and the log holds whole lines only (the
  next reader loads every one, the turns before the disk filled among them);
- the host gets SIGTERM: its finished turns are on disk, its worker is gone within a second;
- the worker is SIGKILLed from outside between two cells: the next cell gets a new worker with
  the run's inputs, and the model is told.

Every wait is on a state (a process's exit, a request's arrival, a port that answers), with a
deadline; nothing sleeps a guessed time.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

import rlmkit
from rlmkit.errors import LMError
from rlmkit.sandbox.process import standing_pids
from rlmkit.testing import is_root_request
from rlmkit.trajectory import read_runs
from tests.helpers.fault_processes import CONTEXT, NO_TMPFS, REPLIES, root_turn
from tests.helpers.script import Script
from tests.helpers.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
START_S = 120.0  # for a fresh interpreter to import rlmkit on a loaded 2-core machine


def _child(*args: str, stdout=subprocess.PIPE) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.fault_processes", *args],
        cwd=REPO,
        env=env,
        stdout=stdout,
        text=True,
    )


def _gone(pid: int) -> bool:
    """Exited: no such process, or a zombie its parent has not reaped yet (its code is over)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


# ------------------------------------------------------------------ the model server dies
@pytest.mark.parametrize("comes_back", [True, False], ids=["restarted", "stays-down"])
def test_model_server_killed_mid_run(comes_back, tmp_path):
    first = _child("server", "0", "1")  # dies in the middle of root turn 1
    port = int(first.stdout.readline())
    api_base = f"http://127.0.0.1:{port}/v1"
    restarted: list[subprocess.Popen] = []

    def restart_when_dead() -> None:
        first.wait()  # the state: the first server is gone (it died answering turn 1)
        if comes_back:
            second = _child("server", str(port), "-1")
            restarted.append(second)
            second.stdout.readline()  # listening again, on the same port

    watcher = threading.Thread(target=restart_when_dead, daemon=True)
    watcher.start()
    # backoff 0.125-0.25 s doubling to 8-16 s: nine tries span at least 30 s, enough for a restart
    retries = 9 if comes_back else 2
    lm = rlmkit.LM("openai/scripted", api_base=api_base, api_key="test-key", cache=False, num_retries=retries)
    rlm = rlmkit.RLM("context -> answer: int", lm=lm, max_iterations=4, log_dir=tmp_path)
    try:
        if comes_back:
            pred = rlm(context=CONTEXT)
            assert pred.answer == len(CONTEXT)
            assert first.returncode == -signal.SIGKILL
            assert [t.reply for t in pred.trajectory.turns] == REPLIES
        else:
            with pytest.raises(LMError) as info:
                rlm(context=CONTEXT)
            partial = info.value.trajectory
            assert partial is not None and partial.status == "error"
            assert [t.reply for t in partial.turns] == REPLIES[:1]  # the turn before the crash, kept
            assert "worker" in partial.turns[0].blocks[0].stdout
            (logged,), bad = read_runs(next(tmp_path.glob("*.jsonl")))
            assert bad == 0 and logged.status == "error" and len(logged.turns) == 1
    finally:
        for proc in [first, *restarted]:
            proc.kill()
            proc.wait()
        watcher.join(timeout=START_S)


# ------------------------------------------------------------------ the log's disk fills
def test_log_disk_fills_mid_run(tmp_path):
    """The log directory is a 256 KiB tmpfs in the child's own mount namespace, filled to the last
    page while the run waits for its third reply."""
    out = tmp_path / "report.json"
    child = _child("full-disk", str(tmp_path / "logs"), str(out))
    said, _ = child.communicate(timeout=START_S)
    code = child.returncode
    if code == NO_TMPFS:  # a container that refuses mount namespaces: nothing to fill here
        pytest.skip(said)
    assert code == 0, said
    report = json.loads(out.read_text())
    assert report["answer"] == len(CONTEXT)  # the run went on to its answer
    assert len(report["turns"]) == 4
    assert any("No space left on device" in w for w in report["warnings"]), report["warnings"]
    raw = Path(str(out) + ".jsonl").read_bytes()
    assert raw.endswith(b"\n")  # no torn line at the end
    (logged,), bad = read_runs(Path(str(out) + ".jsonl"))
    assert bad == 0
    # every line written whole: the start and the two turns logged before the disk filled
    assert [t.model_dump(mode="json") for t in logged.turns] == report["turns"][:2]


# ------------------------------------------------------------------ the host gets SIGTERM
def test_host_sigterm_mid_run(serve, tmp_path):
    asked, release = threading.Event(), threading.Event()
    second_request: list[dict] = []

    def root(body: dict) -> str:
        if root_turn(body) == 1:  # the host now waits on the model, its first turn logged
            second_request.append(body)
            asked.set()
            release.wait(START_S)
        return REPLIES[min(root_turn(body), len(REPLIES) - 1)]

    server, _ = serve(Script(root))
    host = _child("host", server.url, str(tmp_path / "logs"))
    try:
        assert asked.wait(START_S), "the host never reached its second turn"
        worker = int(re.search(r"worker (\d+)", second_request[0]["messages"][-1]["content"]).group(1))
        assert not _gone(worker)
        sent = time.monotonic()
        host.send_signal(signal.SIGTERM)
        assert host.wait(timeout=10) == -signal.SIGTERM
        gone = wait_for(lambda: _gone(worker), "the worker outlived its host", 5.0)
        assert gone - sent < 1.0, f"the worker was gone {gone - sent:.2f} s after SIGTERM"
    finally:
        release.set()
        host.kill()
        host.wait()
    (log,) = (tmp_path / "logs").glob("*.jsonl")
    (logged,), bad = read_runs(log)
    assert bad == 0
    assert [t.reply for t in logged.turns] == REPLIES[:1]  # the finished turn is on disk
    assert f"worker {worker}" in logged.turns[0].blocks[0].stdout


# ------------------------------------------------------------------ the worker is SIGKILLed
def test_worker_killed_between_cells(serve):
    killed: list[int] = []

    def root(body: dict) -> str:
        if is_root_request(body) and root_turn(body) == 1 and not killed:
            pid = int(re.search(r"worker (\d+)", body["messages"][-1]["content"]).group(1))
            os.kill(pid, signal.SIGKILL)  # from outside, while the run waits on the model
            killed.append(pid)
            wait_for(lambda: _gone(pid), "the killed worker did not exit", 5.0)
        return REPLIES[min(root_turn(body), len(REPLIES) - 1)]

    server, lm = serve(Script(root))
    rlm = rlmkit.RLM("context -> answer: int", lm=lm, max_iterations=4)
    pred = rlm(context=CONTEXT)
    assert pred.answer == len(CONTEXT)  # the new worker has the run's inputs
    first, second = pred.trajectory.turns[:2]
    block = second.blocks[0]
    assert block.restarted and "SIGKILL" in block.error and "did not run" in block.error
    third_request = [r for r in server.requests if is_root_request(r)][2]
    told = third_request["messages"][-1]["content"]
    assert "restarted" in told and "SIGKILL" in told and "did not run" in told
    assert f"worker {killed[0]}" in first.blocks[0].stdout


@pytest.mark.parametrize("pool_size", [0, 2])
def test_a_run_cancelled_at_any_moment_leaves_no_worker_behind(pool_size):
    """Cancelled while its worker starts (on a thread, or taken from the pool), while it waits for
    the worker, or while it ends: every run closes its worker. A cancel landing on the wait for
    the worker used to cancel the worker's start itself, and the worker started on regardless."""
    import asyncio
    import random

    from rlmkit.sandbox import pool

    def model(messages):
        return "```repl\nSUBMIT(answer=question)\n```" if is_root_request({"messages": messages}) else "sub"

    rlm = rlmkit.RLM("context, question -> answer", lm=rlmkit.FunctionLM(model))
    before = pool.configure(size=pool_size)
    me = psutil.Process()
    try:

        async def cancel_many() -> None:
            await rlm.acall(context="", question="warm")
            rng = random.Random(7)
            for _ in range(40):
                task = asyncio.ensure_future(rlm.acall(context="", question="q"))
                await asyncio.sleep(rng.random() * 0.006)  # anywhere from the first request to the end
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

        before_runs = {child.pid for child in me.children(recursive=True)}
        asyncio.run(cancel_many())

        def left_behind() -> set[int]:
            # the fork server and the pool's idle workers stand between runs; what earlier tests
            # left is not these runs' doing
            now = {child.pid for child in me.children(recursive=True)}
            return now - before_runs - standing_pids()

        wait_for(lambda: not left_behind(), "every cancelled run's worker gone", timeout=20)
    finally:
        pool.configure(size=before.size, idle_s=before.idle_s)

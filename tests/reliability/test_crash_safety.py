"""Crash safety: kill -9 in the middle loses no finished work.

- ``rlmkit eval`` killed mid-run: every example in ``results.jsonl`` has its whole trajectory,
  no JSONL line a reader chokes on, no sandbox worker outlives the host, and the re-run
  finishes only the examples that were not done (the finished rows are kept byte for byte).
- A torn last line (what a crash in the middle of a write leaves) costs that one record only.
- An optimisation study (``RLMTuner`` on SQLite) killed mid-run resumes from its storage
  without re-running its finished trials.

Each run to be killed is a forked child of the test process (so it skips the interpreter's
import time) talking HTTP to a scripted model server in this process; kill -9 gives it no
chance to clean up. The re-runs happen in the test process itself.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest

import rlmkit
from programs.tasks import generate
from rlmkit.testing import ScriptedServer, is_root_request
from rlmkit.trajectory import read_runs

N_EXAMPLES = 6
CHILD_ERRORS = os.path.join(tempfile.gettempdir(), "rlmkit-crash-test-child-error")  # + .PID
TORN_CHARS = 40  # a half-written results row
EXPLORE = "```repl\nimport re\nfound = re.findall(r'[0-9]+', context)[:3]\nprint(found)\n```"
ANSWER = "```repl\nSUBMIT(answer=[str(x) for x in re.findall(r'[0-9]+', context)[:3]])\n```"


def _needle_root(body: dict) -> str:
    """Two turns per example: look, then answer (an answer computed in the sandbox)."""
    if not is_root_request(body):
        return "sub-answer"
    turns = sum(1 for m in body["messages"] if m["role"] == "assistant")
    return EXPLORE if turns == 0 else ANSWER


@pytest.fixture
def model_server():
    # latency stretches each example so the kill lands while some are finished and some are not
    with ScriptedServer(_needle_root, latency=0.1) as server:
        yield server


@pytest.fixture
def isolated_env(monkeypatch, tmp_path):
    """What a user's shell would hold; a fresh LM cache so every request reaches the server."""
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("RLMKIT_CACHE_DIR", str(tmp_path / "lm-cache"))
    monkeypatch.setenv("COLUMNS", "140")


def _rlmkit_eval(server: ScriptedServer, out: Path) -> None:
    """``rlmkit eval needle ...`` exactly as the command line runs it."""
    from rlmkit.cli import app

    app(
        [
            "eval",
            "needle",
            "--n",
            str(N_EXAMPLES),
            "--length",
            "3000",
            "--lm",
            "openai/scripted",
            "--api-base",
            server.url,
            "--workers",
            "2",
            "--max-iterations",
            "3",
            "--out",
            str(out),
        ],
        standalone_mode=False,
    )


@pytest.fixture(scope="module", autouse=True)
def imported_once():
    """Import the heavy modules before forking, so no child pays litellm's ~5-15 s import."""
    import litellm  # noqa: F401
    import optuna  # noqa: F401

    import rlmkit.cli  # noqa: F401


def _fork(work) -> int:
    """Run ``work()`` in a forked child of this process: its imports are already done."""
    pid = os.fork()
    if pid == 0:  # the child: quiet, and never back into pytest
        code = 1
        try:
            sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115
            work()
            code = 0
        except BaseException:  # noqa: BLE001 - shown by _wait_for if the child dies early
            import traceback

            Path(f"{CHILD_ERRORS}.{os.getpid()}").write_text(traceback.format_exc())
        finally:
            os._exit(code)
    return pid


def _alive(pid: int) -> bool:
    try:
        return os.waitpid(pid, os.WNOHANG) == (0, 0)
    except ChildProcessError:  # already reaped
        return False


def _wait_for(predicate, what: str, pid: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if not _alive(pid):
            error = Path(f"{CHILD_ERRORS}.{pid}")
            pytest.fail(f"the run ended before {what}: {error.read_text() if error.exists() else ''}")
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _kill_hard(pid: int) -> set[int]:
    """SIGKILL ``pid`` (nothing of it runs again); return the pids of its children at that moment."""
    children = {c.pid for c in psutil.Process(pid).children(recursive=True)}
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return children


def _complete_lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


class HoldAfter:
    """A responder that, once ``ready()`` holds, keeps every request waiting until ``release()``:
    the run to be killed cannot reach its end before the kill lands, however slowly this
    process gets scheduled, and ``held`` says a request of unfinished work is waiting."""

    def __init__(self, script, ready):
        self.script, self.ready = script, ready
        self.held, self.released = threading.Event(), threading.Event()

    def __call__(self, body):
        if not self.released.is_set() and self.ready():
            self.held.set()
            self.released.wait(120)
        return self.script(body)

    def release(self) -> None:
        self.released.set()


def _assert_gone(pids: set[int], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    alive = pids
    while alive and time.monotonic() < deadline:
        alive = {pid for pid in alive if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"}
        time.sleep(0.05)
    assert not alive, f"processes outlived their killed host: {alive}"


def _rows(out: Path) -> tuple[list[dict], list[str]]:
    """The readable rows of results.jsonl, and the lines that are not."""
    rows, unreadable = [], []
    for line in (out / "results.jsonl").read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            unreadable.append(line)
    return rows, unreadable


def _trajectories(out: Path, torn: set[str] = frozenset()) -> dict[str, object]:
    runs = {}
    for path in sorted((out / "trajectories").glob("*.jsonl")):
        found, bad = read_runs(path)
        assert bad == (path.name in torn), f"{path.name}: {bad} unreadable line(s)"
        runs.update({t.meta.run_id: t for t in found})
    return runs


def test_killed_eval_keeps_finished_work_and_resumes(model_server, isolated_env, tmp_path, capsys):
    out = tmp_path / "run"
    # once 3 examples have finished, the examples in flight wait (with their sandbox workers up)
    gate = HoldAfter(model_server.responder, lambda: _complete_lines(out / "results.jsonl") >= 3)

    def is_worker(process: psutil.Process) -> bool:
        try:
            return "worker.py" in " ".join(process.cmdline())
        except psutil.Error:  # it ended (or changed uid) between listing and reading it
            return False

    def mid_run() -> bool:
        return gate.held.is_set() and any(map(is_worker, psutil.Process(pid).children(recursive=True)))

    model_server.responder = gate
    pid = _fork(lambda: _rlmkit_eval(model_server, out))
    try:
        _wait_for(mid_run, "an example in flight (its sandbox worker up) after 3 finished", pid)
        workers = _kill_hard(pid)
    finally:
        if _alive(pid):
            _kill_hard(pid)
        gate.release()
    assert workers, "no sandbox worker was running: the kill did not land mid-run"
    _assert_gone(workers)

    before, unreadable = _rows(out)
    assert unreadable == [], "kill -9 tore a line"
    assert 3 <= len(before) < N_EXAMPLES, f"{len(before)} rows: the kill did not land mid-run"
    runs = _trajectories(out)
    for row in before:  # every finished example's trajectory is whole
        traj = runs[row["run_id"]]
        assert traj.status == "ok" and traj.n_turns == row["iterations"] == 2
        assert traj.meta.task["example_id"] == row["id"]
    kept_bytes = (out / "results.jsonl").read_bytes()
    # A crash in the middle of an append leaves half a record and no newline; O_APPEND writes of a
    # short line are not torn by kill -9 in practice, so the torn tail is written here by hand.
    with open(out / "results.jsonl", "a") as fh:
        fh.write(json.dumps(before[0])[:TORN_CHARS])
    torn_run = out / "trajectories" / f"{before[0]['run_id']}.jsonl"
    with open(torn_run, "a") as fh:
        fh.write('{"event": "turn", "turn": {"index": 7, "ke')
    found, bad = read_runs(torn_run)  # the reader skips the torn line and counts it
    assert bad == 1 and found[0].status == "ok" and found[0].n_turns == 2

    requests_before = len(model_server.requests)
    capsys.readouterr()
    _rlmkit_eval(model_server, out)  # the re-run, same arguments
    assert f"{len(before)} finished run(s) kept" in capsys.readouterr().err

    after, unreadable = _rows(out)
    # Only the hand-made torn record is unreadable: the row appended after it was not glued onto it.
    assert all(len(line) <= TORN_CHARS for line in unreadable), (
        f"a row was appended onto the torn line and lost: {unreadable}"
    )
    assert (out / "results.jsonl").read_bytes().startswith(kept_bytes)  # finished rows untouched
    assert sorted(r["id"] for r in after) == sorted({r["id"] for r in after})  # each example once
    assert len(after) == N_EXAMPLES and all(r["status"] == "ok" for r in after)
    # No request of the re-run is about an example that had finished (prompts show a context preview).
    previews = {
        e.id: repr(e.inputs["context"][:120])[1:-1]
        for e in generate("needle", n=N_EXAMPLES, length=3000, seed=0)
    }
    redone = {
        row["id"]
        for row in before
        for body in model_server.requests[requests_before:]
        if previews[row["id"]] in body["messages"][1]["content"]
    }
    assert not redone, f"finished examples were run again: {redone}"
    assert len(model_server.requests) > requests_before
    runs = _trajectories(out, torn={torn_run.name})
    assert all(runs[r["run_id"]].status == "ok" for r in after)


def _tune(api_base: str, storage: str, n_trials: int):
    from optimizers import IntKnob, RLMTuner, SearchSpace
    from optimizers.tuner.scripted import KEYWORD, secret_examples, secret_metric

    lm = rlmkit.LM("openai/scripted", api_base=api_base, api_key="test", cache=False)
    base = rlmkit.RLM("context, question -> answer: int", lm=lm, sandbox="inline")
    space = SearchSpace(
        knobs=[IntKnob("max_iterations", 1, 4)],
        instructions=["Answer quickly.", KEYWORD + ": look first, then search."],
    )
    return RLMTuner(
        base,
        secret_metric,
        secret_examples(2),
        space=space,
        n_trials=n_trials,
        cost_unit="tokens",
        storage=storage,
        study_name="crash",
        seed=0,
        heartbeat_s=1,
    ).fit()


def test_killed_study_resumes_from_its_storage(tmp_path):
    import optuna
    from optuna.trial import TrialState

    from optimizers.tuner.scripted import KeywordResponder

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    n_trials = 4
    url = f"sqlite:///{tmp_path / 'study.db'}"
    finished_states = (TrialState.COMPLETE, TrialState.FAIL, TrialState.PRUNED)

    def finished() -> list:
        return optuna.load_study(study_name="crash", storage=url).get_trials(
            deepcopy=False, states=finished_states
        )

    def finished_so_far() -> int:
        """Read-only peek while the study runs (optuna.load_study would race it creating the schema)."""
        import sqlite3

        try:
            with sqlite3.connect(tmp_path / "study.db", timeout=5) as db:
                return db.execute("SELECT count(*) FROM trials WHERE state = 'COMPLETE'").fetchone()[0]
        except sqlite3.OperationalError:  # no file or no tables yet
            return 0

    gate = HoldAfter(KeywordResponder(), lambda: finished_so_far() >= 1)  # after one trial

    def mid_trial() -> bool:
        """A request of the next trial is held and that trial has recorded a heartbeat: the kill
        lands inside a trial's objective, the state a dead worker leaves behind."""
        import sqlite3

        if not gate.held.is_set():
            return False
        with sqlite3.connect(tmp_path / "study.db", timeout=5) as db:
            query = (
                "SELECT count(*) FROM trial_heartbeats h JOIN trials t ON t.trial_id = h.trial_id "
                "WHERE t.state = 'RUNNING'"
            )
            return db.execute(query).fetchone()[0] >= 1

    with ScriptedServer(gate, latency=0.05) as server:
        pid = _fork(lambda: _tune(server.url, url, n_trials))
        try:
            _wait_for(mid_trial, "a trial in progress after a finished one", pid)
            _kill_hard(pid)
        finally:
            if _alive(pid):
                _kill_hard(pid)
            gate.release()
        done_before = {t.number: (t.params, t.values) for t in finished()}
        assert 1 <= len(done_before) < n_trials, "the kill did not land mid-study"
        result = _tune(server.url, url, n_trials)  # the re-run, same storage

    study = optuna.load_study(study_name="crash", storage=url)
    # The trial the kill interrupted went stale (no heartbeat): it is FAIL now and its
    # configuration was run again; nothing is left RUNNING.
    retries = [t for t in study.trials if "failed_trial" in t.system_attrs]
    assert len(retries) == 1, "the trial the kill interrupted was not retried"
    failed = study.trials[retries[0].system_attrs["failed_trial"]]
    assert failed.state == TrialState.FAIL and retries[0].state == TrialState.COMPLETE
    assert retries[0].params == failed.params  # the same configuration, run again
    assert not [t for t in study.trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    assert all(row.state != "RUNNING" for row in result.rows)
    # Trials that count, the retry included. The retry counts towards n_trials when the re-run saw
    # the dead trial go stale before it had made n_trials; when it had already made them (it
    # started less than a grace period after the kill), the retry runs in addition.
    done_after = {
        t.number: t
        for t in study.get_trials(deepcopy=False, states=finished_states)
        if t.number != failed.number
    }
    assert n_trials <= len(done_after) <= n_trials + 1
    assert {row.number for row in result.rows} >= set(done_after)
    for number, record in done_before.items():  # the finished trials are kept as they were ...
        assert (done_after[number].params, done_after[number].values) == record
        assert done_after[number].user_attrs["worker"] == pid
    # ... and not run again: everything else is the re-run's
    rerun = [number for number, t in done_after.items() if number not in done_before]
    assert all(done_after[number].user_attrs["worker"] == os.getpid() for number in rerun)

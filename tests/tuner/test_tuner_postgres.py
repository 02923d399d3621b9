"""The tuner on PostgreSQL: two worker processes share one study with no trial run twice and find the
single-process front; a worker killed with kill -9 mid-trial leaves a FAIL trial whose configuration
runs again (optuna heartbeats), and no result lists it as running."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import optuna
import pytest

from optimizers.tuner.storage import open_storage
from tests.helpers.postgres_server import ThrowawayPostgres, find_bin

pytest.importorskip("psycopg", reason="the postgres extra (scripts/test.sh installs it)")
if not find_bin("initdb"):
    pytest.skip(
        "PostgreSQL server not installed (scripts/test.sh installs Debian's)", allow_module_level=True
    )

REPO = Path(__file__).resolve().parents[2]
N_TRIALS = 8  # the whole grid: 4 max_iterations x 2 instructions

# argv: storage URL, study name, log dir, [stall]. Each worker logs the trials it starts and ends
# (one line per event) so the test can see who ran what; with "stall", the first example of its
# first trial writes stalled.pid and blocks, so the test can kill -9 the worker mid-trial.
WORKER = textwrap.dedent(
    """
    import json, os, sys, threading
    from pathlib import Path
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    import optuna
    import rlmkit
    from rlmkit.testing import ScriptedServer
    from optimizers import IntKnob, RLMTuner, SearchSpace
    from optimizers.tuner.scripted import KEYWORD, KeywordResponder, secret_examples, secret_metric
    from optimizers.tuner.space import INSTRUCTION_PARAM

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    url, study, logs = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    stall = len(sys.argv) > 4
    log = open(logs / f"{os.getpid()}.log", "a", buffering=1)

    def metric(example, prediction, trace=None):
        if stall and not (logs / "stalled.pid").exists():
            (logs / "stalled.tmp").write_text(str(os.getpid()))
            (logs / "stalled.tmp").rename(logs / "stalled.pid")
            threading.Event().wait()  # until kill -9
        return secret_metric(example, prediction)

    def progress(event, **info):
        if event in ("trial_start", "trial_end"):
            log.write(json.dumps({"event": event, "number": info["number"]}) + "\\n")
        elif event == "study":  # what the CLI's trials bar shows: the whole study's count
            log.write(json.dumps({"event": event, "done": info["done"]}) + "\\n")

    grid = {"max_iterations": [1, 2, 3, 4], INSTRUCTION_PARAM: [0, 1]}
    with ScriptedServer(KeywordResponder(), latency=0.01) as server:
        lm = rlmkit.LM("openai/scripted", api_base=server.url, api_key="test", cache=False)
        base = rlmkit.RLM("context, question -> answer: int", lm=lm, sandbox="inline")
        space = SearchSpace(knobs=[IntKnob("max_iterations", 1, 4)],
                            instructions=["Answer quickly.", KEYWORD + ": look first, then search."])
        tuner = RLMTuner(base, metric, secret_examples(3), space=space, n_trials=N_TRIALS, cost_unit="tokens",
                         storage=url, study_name=study, heartbeat_s=1, pruner=optuna.pruners.NopPruner(),
                         sampler=optuna.samplers.GridSampler(grid, seed=0))
        result = tuner.fit(on_progress=progress)
        rows = [{"number": r.number, "state": r.state, "params": r.params, "accuracy": r.accuracy,
                 "cost": r.cost} for r in result.rows]
        (logs / f"{os.getpid()}.result.json").write_text(json.dumps(rows))
    """.replace("N_TRIALS", str(N_TRIALS))
)


@pytest.fixture(scope="module")
def postgres():
    with ThrowawayPostgres() as server:
        yield server


def start_worker(tmp_path: Path, url: str, study: str, logs: Path, *extra: str) -> subprocess.Popen:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    logs.mkdir(exist_ok=True)
    return subprocess.Popen(
        [sys.executable, str(script), url, study, str(logs), *extra],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(worker: subprocess.Popen) -> None:
    _, err = worker.communicate(timeout=300)
    assert worker.returncode == 0, err[-3000:]


def wait_for(condition, what: str, workers, timeout: float = 180) -> None:
    """Wait for a state the workers write (a file), failing fast if a worker died first."""
    deadline = time.monotonic() + timeout
    while not condition():
        for worker in workers:
            assert worker.poll() is None, f"a worker exited before {what}: {worker.communicate()[1][-2000:]}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def events(logs: Path, pid: int) -> list[dict]:
    path = logs / f"{pid}.log"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def front(rows: list[dict]) -> set:
    done = [r for r in rows if r["state"] == "COMPLETE"]
    best = [
        r
        for r in done
        if not any(
            o["accuracy"] >= r["accuracy"]
            and o["cost"] <= r["cost"]
            and (o["accuracy"], o["cost"]) != (r["accuracy"], r["cost"])
            for o in done
        )
    ]
    return {(json.dumps(r["params"], sort_keys=True), r["accuracy"], r["cost"]) for r in best}


def test_two_workers_share_a_study_and_find_the_single_process_front(postgres, tmp_path):
    single = start_worker(tmp_path, postgres.url, "single", tmp_path / "single")
    finish(single)
    reference = json.loads((tmp_path / "single" / f"{single.pid}.result.json").read_text())

    logs = tmp_path / "pair"
    workers = [start_worker(tmp_path, postgres.url, "pair", logs) for _ in range(2)]
    for worker in workers:
        finish(worker)
    study = optuna.load_study(study_name="pair", storage=open_storage(postgres.url, tmp_path))
    started = {
        w.pid: [e["number"] for e in events(logs, w.pid) if e["event"] == "trial_start"] for w in workers
    }
    ran = [number for numbers in started.values() for number in numbers]
    assert len(ran) == len(set(ran)), f"a trial ran twice: {started}"  # no trial number in both workers
    assert sorted(ran) == sorted(t.number for t in study.trials)
    assert all(t.state.name == "COMPLETE" for t in study.trials) and len(study.trials) >= N_TRIALS
    for worker in workers:  # each worker's result is the whole study's, and the same front
        rows = json.loads((logs / f"{worker.pid}.result.json").read_text())
        assert front(rows) == front(reference) and front(reference)
        # its progress counted every worker's trials, not only the ones it ran
        assert [e["done"] for e in events(logs, worker.pid) if e["event"] == "study"][-1] >= N_TRIALS


def test_a_worker_killed_mid_trial_leaves_a_failed_trial_that_is_retried(postgres, tmp_path):
    logs = tmp_path / "logs"
    victim = start_worker(tmp_path, postgres.url, "killed", logs, "stall")
    wait_for(lambda: (logs / "stalled.pid").exists(), "the victim's first trial", [victim])
    healthy = start_worker(tmp_path, postgres.url, "killed", logs)
    wait_for(
        lambda: any(e["event"] == "trial_end" for e in events(logs, healthy.pid)),
        "a trial of the healthy worker",
        [victim, healthy],
    )
    os.kill(victim.pid, signal.SIGKILL)
    victim.communicate(timeout=60)
    finish(healthy)  # it fails the stale trial, runs its retry, finishes the study

    study = optuna.load_study(study_name="killed", storage=open_storage(postgres.url, tmp_path))
    [lost] = [t for t in study.trials if t.state.name == "FAIL"]
    assert lost.user_attrs["worker"] == victim.pid
    [retry] = [t for t in study.trials if t.system_attrs.get("failed_trial") == lost.number]
    assert retry.state.name == "COMPLETE" and retry.params == lost.params
    assert retry.user_attrs["worker"] == healthy.pid
    assert not [t for t in study.trials if t.state.name in ("RUNNING", "WAITING")]
    completed = [t for t in study.trials if t.state.name == "COMPLETE"]
    assert len(completed) >= N_TRIALS  # the lost trial did not count towards n_trials
    rows = json.loads((logs / f"{healthy.pid}.result.json").read_text())
    assert "RUNNING" not in {r["state"] for r in rows}
    assert {r["number"]: r["state"] for r in rows}[lost.number] == "FAIL"


def test_a_plain_postgresql_url_opens_with_heartbeats(postgres, tmp_path):
    import importlib.util

    storage = open_storage(
        postgres.url.replace("postgresql+psycopg://", "postgresql://"), tmp_path, heartbeat_s=5
    )
    if importlib.util.find_spec("psycopg2") is None:  # SQLAlchemy's default driver is absent: psycopg 3 it is
        assert storage.engine.url.drivername == "postgresql+psycopg"
    assert storage.get_heartbeat_interval() == 5
    assert storage.get_heartbeat_stale_trial_callback() is not None  # a stale trial is retried
    assert open_storage(postgres.url, tmp_path, heartbeat_s=None).get_heartbeat_interval() is None

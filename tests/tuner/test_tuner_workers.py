"""Two worker processes share one study (optuna's own distributed mode) on SQLite or a journal file."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import optuna
import pytest

from optimizers.tuner.storage import open_storage

REPO = Path(__file__).resolve().parents[2]
N_TRIALS = 8

WORKER = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    import optuna
    import rlmkit
    from rlmkit.testing import ScriptedServer
    from optimizers import IntKnob, RLMTuner, SearchSpace
    from optimizers.tuner.scripted import KEYWORD, KeywordResponder, secret_examples, secret_metric

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage, n_trials, ready = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    # Start searching together (imports take seconds): otherwise one worker may do every trial.
    (ready / str(os.getpid())).touch()
    deadline = time.monotonic() + 120
    while len(list(ready.iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    with ScriptedServer(KeywordResponder(), latency=0.01) as server:
        lm = rlmkit.LM("openai/scripted", api_base=server.url, api_key="test", cache=False)
        base = rlmkit.RLM("context, question -> answer: int", lm=lm, sandbox="inline")
        space = SearchSpace(knobs=[IntKnob("max_iterations", 1, 4)],
                            instructions=["Answer quickly.", KEYWORD + ": look first, then search."])
        result = RLMTuner(base, secret_metric, secret_examples(4), space=space, n_trials=n_trials,
                          cost_unit="tokens", storage=storage, study_name="shared").fit()
        print("worker", os.getpid(), "saw", len(result.rows), "trials")
    """
)


@pytest.mark.parametrize("kind", ["sqlite"])  # the journal backend: test_tuner_parts.py
def test_two_processes_share_one_study(tmp_path, kind):
    url = f"sqlite:///{tmp_path / 'shared.db'}" if kind == "sqlite" else str(tmp_path / "shared.journal")
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    ready = tmp_path / "ready"
    ready.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    start = time.monotonic()
    workers = [
        subprocess.Popen(
            [sys.executable, str(script), url, str(N_TRIALS), str(ready)],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [worker.communicate(timeout=240) for worker in workers]
    for worker, (_out, err) in zip(workers, outputs):
        assert worker.returncode == 0, err[-3000:]
    print(f"\n{kind}: 2 workers, {N_TRIALS} trials in {time.monotonic() - start:.1f}s")

    study = optuna.load_study(study_name="shared", storage=open_storage(url, tmp_path))
    finished = [t for t in study.trials if t.state.is_finished()]
    # MaxTrialsCallback stops each worker once the study holds N finished trials; a worker may
    # have started one more just before the other finished the N-th.
    assert N_TRIALS <= len(finished) <= N_TRIALS + 1
    assert len({t.number for t in study.trials}) == len(study.trials)
    pids = {worker.pid for worker in workers}
    assert {t.user_attrs.get("worker") for t in finished} == pids  # both did part of the work


@pytest.mark.timeout(120)
def test_a_running_trial_without_heartbeats_is_not_waited_for(tmp_path):
    """A trial left RUNNING by a run without heartbeats can never go stale: fit must not wait on it."""
    import rlmkit
    from optimizers import IntKnob, RLMTuner, SearchSpace
    from optimizers.tuner.scripted import KEYWORD, KeywordResponder, secret_examples, secret_metric
    from rlmkit.testing import ScriptedServer

    url = f"sqlite:///{tmp_path / 'study.db'}"
    old = optuna.create_study(study_name="s", storage=url, directions=["maximize", "minimize"])
    orphan = old.ask()  # RUNNING, no heartbeat: its process is gone
    with ScriptedServer(KeywordResponder()) as server:
        lm = rlmkit.LM("openai/scripted", api_base=server.url, api_key="test", cache=False)
        base = rlmkit.RLM("context, question -> answer: int", lm=lm, sandbox="inline")
        space = SearchSpace(knobs=[IntKnob("max_iterations", 1, 4)], instructions=["Go.", KEYWORD])
        result = RLMTuner(
            base,
            secret_metric,
            secret_examples(1),
            space=space,
            n_trials=2,
            cost_unit="tokens",
            storage=url,
            study_name="s",
            heartbeat_s=1,
        ).fit()
    states = {row.number: row.state for row in result.rows}
    assert states[orphan.number] == "RUNNING" and sum(s == "COMPLETE" for s in states.values()) == 2

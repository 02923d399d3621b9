"""programs.executors: eval examples as Ray tasks behave like threads (scores, streaming, resume),
and a worker killed mid-example costs only that example, which Ray runs again."""

from __future__ import annotations

import functools
import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

import rlmkit
from programs import evaluate, program_for
from programs.evaluate import run_job
from programs.executors import RayExecutor, ThreadExecutor, _probe, make_executor
from programs.tasks import generate
from programs.tasks.needle import score as needle_score
from rlmkit.errors import ConfigError
from rlmkit.testing.server import ScriptedServer, is_root_request
from tests.tasks.test_evaluate import NEEDLE_ROOT

ray = pytest.importorskip("ray")  # the `cluster` extra (scripts/test.sh installs it)
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster():
    """One small local Ray instance for the module (starting Ray takes seconds on 2 cores)."""
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
        runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}},
    )  # workers import this checkout, tests too
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def server():
    with ScriptedServer(lambda body: NEEDLE_ROOT if is_root_request(body) else "4242") as srv:
        yield srv


def needle_factory(url):
    lm = rlmkit.LM("openai/scripted", api_base=url, api_key="test", cache=False, num_retries=0)
    return lambda: program_for("needle", lm=lm, max_iterations=3)


def test_ray_rows_match_threads_and_stream_into_the_run_dir(cluster, server, tmp_path):
    examples = generate("needle", n=4, length=8_000, seed=11)
    threads = evaluate(
        needle_factory(server.url), examples, workers=2, out_dir=tmp_path / "threads", config={"x": 1}
    )
    seen = []
    on_ray = evaluate(
        needle_factory(server.url),
        examples,
        out_dir=tmp_path / "ray",
        config={"x": 1},
        ray=True,
        on_result=lambda row: seen.append(len((tmp_path / "ray" / "results.jsonl").read_text().splitlines())),
    )
    assert [r.score for r in on_ray.rows] == [r.score for r in threads.rows] == [1.0] * 4
    assert [(r.id, r.iterations, r.calls) for r in on_ray.rows] == [
        (r.id, r.iterations, r.calls) for r in threads.rows
    ]
    assert seen == [1, 2, 3, 4]  # each row is on disk (on the driver) before the next one arrives
    runs = rlmkit.TrajectoryLog(tmp_path / "ray" / "trajectories").runs()
    assert sorted(r.meta.task["example_id"] for r in runs) == [e.id for e in examples]
    assert {r.meta.run_id for r in runs} == {r.run_id for r in on_ray.rows}
    assert ray.is_initialized()  # the caller's Ray session is left running

    before = len(server.requests)
    again = evaluate(
        needle_factory(server.url), examples, out_dir=tmp_path / "ray", config={"x": 1}, ray=True
    )
    assert len(server.requests) == before and again.mean == 1.0  # resumed: nothing ran again
    with pytest.raises(ConfigError, match="another configuration"):
        evaluate(needle_factory(server.url), examples, out_dir=tmp_path / "ray", config={"x": 2}, ray=True)


class StallOnce:
    """A program that, the first time it sees ``victim``, leaves a marker holding its process id
    and waits to be killed; every later run (Ray's retry included) answers at once."""

    def __init__(self, marks: Path, victim: str):
        self.marks, self.victim = marks, victim

    def __call__(self, context, question):
        example = next(e for e in EXAMPLES if e.inputs["question"] == question)
        attempt = self.marks / f"{example.id}.{len(list(self.marks.glob(example.id + '.*')))}"
        attempt.write_text(str(os.getpid()))
        if example.id == self.victim and attempt.name.endswith(".0"):
            threading.Event().wait(120)  # killed long before this returns
        return {"answer": example.gold}


EXAMPLES = generate("needle", n=4, length=2_000, seed=3)


def test_a_worker_killed_mid_example_loses_only_that_example(cluster, tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    victim = EXAMPLES[1].id
    results: dict = {}
    runner = threading.Thread(
        target=lambda: results.update(
            done=evaluate(
                StallOnce(marks, victim), EXAMPLES, out_dir=tmp_path / "run", config={"x": 1}, ray=True
            )
        )
    )
    runner.start()
    first = marks / f"{victim}.0"
    deadline = time.monotonic() + 120
    while not first.exists() or not first.read_text():  # the state we wait for: the victim is running
        assert time.monotonic() < deadline and runner.is_alive(), "the victim example never started"
        time.sleep(0.05)
    os.kill(int(first.read_text()), signal.SIGKILL)
    runner.join(180)
    result = results["done"]
    assert [r.status for r in result.rows] == ["ok"] * 4 and result.mean == 1.0
    attempts = sorted(p.name for p in marks.iterdir())
    assert attempts == sorted([f"{e.id}.0" for e in EXAMPLES] + [f"{victim}.1"])  # only the victim ran twice
    rows = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in rows) == sorted(e.id for e in EXAMPLES)


def test_a_task_that_keeps_losing_its_worker_is_recorded_and_the_rest_go_on(cluster):
    def dies_on_first(context, question):
        if question == EXAMPLES[0].inputs["question"]:
            os._exit(1)  # the worker process dies, every time
        return {"answer": next(e.gold for e in EXAMPLES if e.inputs["question"] == question)}

    executor = RayExecutor(max_retries=1)  # evaluate(..., ray=True) is the same executor with 3 retries
    # the dying example is in a group (one task for several questions): each of them is lost
    jobs = [("program", dies_on_first, e, 0) for e in EXAMPLES[1:3]]
    jobs.append(("program", dies_on_first, (EXAMPLES[3], EXAMPLES[0]), 0))
    finished = list(executor.run(jobs, functools.partial(run_job, metric=needle_score)))
    rows = [row for item in finished for row, _ in (item if isinstance(item, list) else [item])]
    lost = [r for r in rows if r.status == "failed"]
    assert sorted(r.id for r in lost) == sorted([EXAMPLES[0].id, EXAMPLES[3].id])
    assert {r.failure for r in lost} == {"worker_lost"}
    assert sorted(r.id for r in rows if r.status == "ok") == [EXAMPLES[1].id, EXAMPLES[2].id]


def test_questions_sharing_a_context_run_in_one_session_per_context_on_ray(cluster, tmp_path):
    examples = generate("shared_context", n=6, length=20_000, seed=2, questions=3)
    golds = {e.inputs["question"]: e.gold for e in examples}

    def model(messages):
        task = messages[1]["content"]
        line = next(x for x in task.splitlines() if x.startswith("- `question`"))
        question = max((q for q in golds if q[:50] in line), key=lambda q: len(q) if q in line else 0)
        # a variable each call leaves in the REPL: the next call's prompt lists it
        return f"```repl\nasked = globals().get('asked', 0) + 1\nSUBMIT(answer={str(golds[question])!r})\n```"

    def factory():  # called on the Ray worker: its own RLM, and for each group its one session
        return rlmkit.RLM("context, question -> answer", lm=rlmkit.FunctionLM(model))

    result = evaluate(factory, examples, out_dir=tmp_path / "run", config={"x": 1}, ray=True)
    assert [row.score for row in result.rows] == [1.0] * 6
    runs = {
        run.meta.task["example_id"]: run
        for run in rlmkit.TrajectoryLog(tmp_path / "run" / "trajectories").runs()
    }
    sessions = [runs[e.id].meta.session for e in examples]
    assert [s["call"] for s in sessions] == [1, 2, 3, 1, 2, 3]
    assert len({s["id"] for s in sessions[:3]}) == 1 and len({s["id"] for s in sessions}) == 2
    assert all(s["restored"] is None for s in sessions)  # one live worker per group, never rebuilt
    tasks = [" ".join(m.content for m in runs[e.id].turns[0].new_messages) for e in examples]
    assert ["- `asked`: int" in task for task in tasks] == [False, True, True] * 2  # the REPL lived on


def test_an_unreachable_cluster_address_fails_fast():
    import socket

    with socket.socket() as closed:  # a port nobody listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    # (evaluate(..., ray=ADDRESS) checks this before ray.init; this module's own Ray session
    # would be reused instead, so the check is called directly here)
    with pytest.raises(ConfigError, match="cannot reach the Ray cluster"):
        _probe(f"127.0.0.1:{port}")
    with pytest.raises(ConfigError, match="cannot reach the Ray cluster"):
        _probe(f"ray://127.0.0.1:{port}")
    _probe("auto")  # Ray answers 'auto' quickly by itself


def test_make_executor_defaults_to_threads():
    assert isinstance(make_executor(3), ThreadExecutor) and make_executor(3).workers == 3
    assert isinstance(make_executor(3, ray="auto"), RayExecutor)
    with pytest.raises(rlmkit.errors.UserError):
        RayExecutor("")


def test_cli_eval_with_ray_prints_the_same_table(cluster, server, tmp_path):
    from typer.testing import CliRunner

    from rlmkit.cli import app

    args = [
        "eval",
        "needle",
        "--ray",
        "local",
        "--n",
        "2",
        "--length",
        "8000",
        "--seed",
        "3",
        "--lm",
        "openai/scripted",
        "--api-base",
        server.url,
        "--out",
        str(tmp_path),
        "--max-iterations",
        "3",
        "--baseline",
        "--window-tokens",
        "1000",
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "1.000 [1.000, 1.000]" in result.output and "baseline" in result.output  # both pickled to workers
    assert len((tmp_path / "results.jsonl").read_text().splitlines()) == 4

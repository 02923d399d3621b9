"""programs.evaluate: concurrency, failure kinds, resumable run directories, baseline, real RLM runs."""

from __future__ import annotations

import json
import threading

import pytest

import rlmkit
from programs import evaluate, program_for
from programs.baseline import TRUNCATION_NOTE, BaselineLM
from programs.eval_results import bootstrap_ci
from programs.evaluate import EvalResult, ExampleResult
from programs.tasks import generate
from programs.tasks.needle import score as needle_score
from rlmkit.errors import ConfigError, LMUnavailableError, MaxIterationsError, UserError
from rlmkit.testing.server import ScriptedServer, is_root_request

NEEDLE_ROOT = """```repl
import re
key = re.search(r"for (\\S+) mentioned", question).group(1)
values = re.findall(r"special magic \\w+ for " + re.escape(key) + r" is: (\\S+?)\\.(?:\\s|$)", context)
print(values)
SUBMIT(answer=values)
```"""


def oracle(wrong=(), fail=None):
    """A plain program: right, wrong, or failing per example (found by its gold in the context)."""
    calls = []
    lock = threading.Lock()

    def program(context, question):
        example = next(e for e in EXAMPLES if e.inputs["context"] == context)
        with lock:
            calls.append(example.id)
        if fail and example.id in fail:
            raise fail[example.id]
        return {"answer": ["nope"] if example.id in wrong else example.gold}

    program.calls = calls
    return program


EXAMPLES = generate("needle", n=6, length=4_000, seed=5)


def test_scores_failures_by_kind_and_interval():
    ids = [e.id for e in EXAMPLES]
    program = oracle(
        wrong={ids[1]}, fail={ids[2]: MaxIterationsError("no answer"), ids[3]: RuntimeError("boom")}
    )
    result = evaluate(program, EXAMPLES, workers=3)
    assert [r.id for r in result.rows] == ids  # example order, whatever order they finished in
    assert [r.score for r in result.rows] == [1.0, 0.0, 0.0, 0.0, 1.0, 1.0]
    assert result.failures == {"max_iterations": 1, "exception": 1}
    assert result.rows[3].error == "RuntimeError: boom"
    assert result.mean == pytest.approx(0.5)
    low, high = result.ci95
    assert 0.0 <= low < 0.5 < high <= 1.0
    text = result.render()
    assert "0.500" in text and "max_iterations: 1" in text


def test_the_interval_of_fractional_scores_is_a_seeded_bootstrap_of_their_mean():
    scores = [1.0, 0.75, 0.5625, 0.0, 0.0, 1.0, 0.42, 0.0]  # 0.75^|error| and F1 scores, not 0/1
    low, high = bootstrap_ci(scores)
    mean = sum(scores) / len(scores)
    assert 0.0 < low < mean < high < 1.0  # a binomial interval on these would be meaningless
    assert bootstrap_ci(scores) == (low, high)  # seeded: the docs render the same interval every time
    wide, narrow = bootstrap_ci(scores), bootstrap_ci(scores * 25)
    assert narrow[1] - narrow[0] < (wide[1] - wide[0]) / 3  # more examples, a tighter interval
    assert bootstrap_ci([0.5]) == (0.5, 0.5) and bootstrap_ci([0.3] * 4) == (0.3, 0.3)


def test_resume_skips_finished_and_refuses_another_config(tmp_path):
    out = tmp_path / "run"
    first = oracle(fail={EXAMPLES[0].id: RuntimeError("flaky")})
    evaluate(first, EXAMPLES[:4], out_dir=out, config={"suite": "needle", "lm": "a"})
    assert sorted(first.calls) == sorted(e.id for e in EXAMPLES[:4])
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and json.loads((out / "config.json").read_text())["config"]["lm"] == "a"

    again = oracle()
    result = evaluate(again, EXAMPLES, out_dir=out, config={"suite": "needle", "lm": "a"})
    assert sorted(again.calls) == sorted(e.id for e in EXAMPLES[4:])  # only the new ones ran
    assert result.n == 6 and result.failures == {"exception": 1}

    retry = oracle()
    result = evaluate(retry, EXAMPLES, out_dir=out, config={"suite": "needle", "lm": "a"}, retry_failed=True)
    assert retry.calls == [EXAMPLES[0].id] and result.mean == 1.0

    with pytest.raises(ConfigError, match="another configuration"):
        evaluate(oracle(), EXAMPLES, out_dir=out, config={"suite": "needle", "lm": "b"})


def test_a_run_its_model_never_answered_runs_again_on_resume_and_its_new_row_wins(tmp_path):
    """A run that failed because the model could not be reached measured nothing about the
    program: resuming runs it again (a run that failed on its own merits is kept), and readers
    of the folder see the latest row of each run."""
    config = {"suite": "needle", "lm": "a"}
    unreachable = LMUnavailableError("could not reach http://127.0.0.1:1/v1 after 3 tries: timed out")
    first = oracle(fail={EXAMPLES[0].id: unreachable, EXAMPLES[1].id: MaxIterationsError("6 turns")})
    result = evaluate(first, EXAMPLES[:3], out_dir=tmp_path, config=config)
    assert result.failures == {"lm_error": 1, "max_iterations": 1}

    again = oracle()
    result = evaluate(again, EXAMPLES[:3], out_dir=tmp_path, config=config)
    assert again.calls == [EXAMPLES[0].id]  # only the unanswered run; the max_iterations one stays
    assert result.failures == {"max_iterations": 1} and result.rows[0].score == 1.0
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    assert len(lines) == 4  # appended, never rewritten: a kill mid-resume loses nothing
    from optimizers.selftrain.eval_rows import read_rows

    rows = {row["id"]: row for row in read_rows(tmp_path)}
    assert len(read_rows(tmp_path)) == 3 and rows[EXAMPLES[0].id]["status"] == "ok"
    assert evaluate(oracle(), EXAMPLES[:3], out_dir=tmp_path, config=config).n == 3


def test_a_half_written_results_line_reruns_that_example(tmp_path):
    program = oracle()
    evaluate(program, EXAMPLES[:2], out_dir=tmp_path, config={"x": 1})
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    (tmp_path / "results.jsonl").write_text(lines[0] + "\n" + lines[1][: len(lines[1]) // 2])
    again = oracle()
    evaluate(again, EXAMPLES[:2], out_dir=tmp_path, config={"x": 1})
    assert len(again.calls) == 1


def test_bad_arguments_are_user_errors():
    with pytest.raises(UserError, match="workers"):
        evaluate(oracle(), EXAMPLES, workers=0)
    with pytest.raises(UserError, match="no examples"):
        evaluate(oracle(), [])
    with pytest.raises(UserError, match="unique"):
        evaluate(oracle(), [EXAMPLES[0], EXAMPLES[0]])


def test_result_round_trips_as_json():
    result = evaluate(oracle(), EXAMPLES[:2])
    again = EvalResult.model_validate_json(result.model_dump_json())
    assert again.mean == result.mean and isinstance(again.rows[0], ExampleResult)


@pytest.fixture(scope="module")
def server():
    failing = {"on": False}

    def responder(body):
        text = json.dumps(body["messages"])
        if failing["on"] and "fail-me" in text:
            raise RuntimeError("provider down for this one")
        if is_root_request(body):
            return NEEDLE_ROOT
        return "4242"  # the baseline's reply

    with ScriptedServer(responder) as srv:
        srv.failing = failing
        yield srv


def scripted_lm(server):
    return rlmkit.LM("openai/scripted", api_base=server.url, api_key="test", cache=False, num_retries=0)


def test_real_rlm_runs_are_scored_logged_and_resumed(server, tmp_path):
    examples = generate("needle", n=3, length=30_000, seed=9)

    def factory():
        return program_for("needle", lm=scripted_lm(server), max_iterations=3)

    result = evaluate(factory, examples, workers=2, out_dir=tmp_path, config={"lm": "scripted"})
    assert result.mean == 1.0 and result.failures == {}
    row = result.rows[0]
    assert row.iterations == 1 and row.calls == 1 and row.prompt_tokens > 0 and row.run_id
    runs = rlmkit.TrajectoryLog(tmp_path / "trajectories").runs()
    assert sorted(r.meta.task["example_id"] for r in runs) == [e.id for e in examples]
    assert all(r.score == 1.0 and r.status == "ok" for r in runs)
    assert all(
        examples[0].context[:5_000] not in (tmp_path / "trajectories" / f"{r.meta.run_id}.jsonl").read_text()
        for r in runs
    )  # a trajectory never holds the context body
    before = len(server.requests)
    evaluate(factory, examples, out_dir=tmp_path, config={"lm": "scripted"})
    assert len(server.requests) == before  # resumed: nothing ran again


def test_a_model_failing_mid_eval_is_recorded_and_the_rest_go_on(server):
    examples = generate("needle", n=3, length=3_000, seed=2)
    poisoned = examples[1].model_copy(
        update={"inputs": {**examples[1].inputs, "question": examples[1].inputs["question"] + " fail-me"}}
    )
    server.failing["on"] = True
    try:
        result = evaluate(
            lambda: program_for("needle", lm=scripted_lm(server), max_iterations=2),
            [examples[0], poisoned, examples[2]],
            workers=3,
        )
    finally:
        server.failing["on"] = False
    assert [r.status for r in result.rows] == ["ok", "failed", "ok"]
    assert result.failures == {"lm_error": 1}
    assert issubclass(LMUnavailableError, rlmkit.errors.LMError)


def test_baseline_reads_the_context_cut_to_its_window(server):
    examples = generate("needle", n=2, length=60_000, seed=4)
    baseline = BaselineLM(
        "context, question -> answer: list[str]", lm=scripted_lm(server), window_tokens=2_000
    )
    before = len(server.requests)
    result = evaluate(oracle_for(examples), examples, baseline=baseline, metric=needle_score)
    sent = server.requests[before:]
    assert len(sent) == 2
    user = sent[0]["messages"][1]["content"]
    assert TRUNCATION_NOTE.strip() in user and len(user) < 2_000 * 4 + 1_000
    assert result.baseline is not None and result.baseline.n == 2
    assert [r.answer for r in result.baseline.rows] == [["4242"], ["4242"]]
    assert result.mean == 1.0 and result.baseline.mean == 0.0
    assert "baseline" in result.render()


def oracle_for(examples):
    gold = {e.inputs["context"]: e.gold for e in examples}
    return lambda context, question: {"answer": gold[context]}


def test_the_baselines_window_is_the_models_own_unless_given():
    from programs.baseline import window_tokens_of
    from rlmkit.local import LOCAL_MODEL_NAME, LocalServerConfig

    listed = rlmkit.LM("openai/gpt-4o-mini", api_key="test-key", cache=False)
    assert window_tokens_of(listed) == 128_000  # max_input_tokens in litellm's model map
    assert BaselineLM("context -> answer", lm=listed).window_tokens == 128_000
    assert BaselineLM("context -> answer", lm=listed, window_tokens=4_000).window_tokens == 4_000
    embedded = rlmkit.LM(LOCAL_MODEL_NAME, api_base="http://127.0.0.1:9/v1", api_key="local", cache=False)
    assert window_tokens_of(embedded) == LocalServerConfig().ctx
    unknown = rlmkit.LM("openai/house-model", api_base="http://127.0.0.1:9/v1", api_key="k", cache=False)
    with pytest.raises(UserError, match="--window-tokens"):
        BaselineLM("context -> answer", lm=unknown)  # before any request: port 9 is never asked

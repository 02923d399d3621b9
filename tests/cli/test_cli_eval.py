"""`rlmkit eval`: a real run against the scripted server, resume, baseline, and bad input."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from rlmkit.cli import app
from rlmkit.testing.server import ScriptedServer, is_root_request
from tests.tasks.test_evaluate import NEEDLE_ROOT

runner = CliRunner()


@pytest.fixture(scope="module")
def server():
    with ScriptedServer(lambda body: NEEDLE_ROOT if is_root_request(body) else "4242") as srv:
        yield srv


def run(server, out, *extra):
    args = [
        "eval",
        "needle",
        "--n",
        "3",
        "--length",
        "8000",
        "--seed",
        "3",
        "--lm",
        "openai/scripted",
        "--api-base",
        server.url,
        "--out",
        str(out),
        "--max-iterations",
        "3",
        "--workers",
        "2",
        *extra,
    ]
    return runner.invoke(app, args)


def test_eval_runs_prints_the_table_and_resumes(server, tmp_path):
    out = tmp_path / "run"
    result = run(server, out, "--baseline", "--window-tokens", "1000")
    assert result.exit_code == 0, result.output
    assert "1.000 [1.000, 1.000]" in result.output and "baseline" in result.output
    # the bar's live fields come from the runs' events: every model call counted, no run left in flight
    assert "running 0, model calls 3" in result.output  # 3 examples, each answered in one root turn
    # written to a log, not a terminal: a line per finished run, with the time left (6 with baselines)
    assert "[6/6] needle-s3-" in result.output and "about 0 s left" in result.output
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted((r["program"], r["id"]) for r in rows) == sorted(
        (p, f"needle-s3-{i:04d}") for p in ("program", "baseline") for i in range(3)
    )
    summary = json.loads((out / "summary.json").read_text())
    assert summary["summary"]["mean"] == 1.0 and summary["baseline"]["n"] == 3
    assert len(list((out / "trajectories").glob("*.jsonl"))) == 6

    before = len(server.requests)
    again = run(server, out, "--baseline", "--window-tokens", "1000")
    assert again.exit_code == 0, again.output
    assert "resuming" in again.output and len(server.requests) == before

    other = run(server, out, "--max-depth", "2")
    assert other.exit_code == 2 and "another configuration" in other.output


@pytest.mark.parametrize(
    "args,message",
    [
        (["eval", "nope", "--lm", "openai/x"], "unknown suite 'nope'"),
        (["eval", "needle", "--lm", "openai/x", "--knob", "colour=red"], "no knob 'colour'"),
        (["eval", "needle", "--lm", "openai/x", "--length", "10"], "too small"),
        (
            [
                "eval",
                "needle",
                "--lm",
                "openai/x",
                "--api-base",
                "http://127.0.0.1:9/v1",
                "--program",
                "tally_then_answer",
            ],
            "answers ['aggregation']",
        ),
        (  # a model whose window litellm's map does not know: the baseline needs one given
            ["eval", "needle", "--lm", "openai/x", "--api-base", "http://127.0.0.1:9/v1", "--baseline"],
            "--window-tokens",
        ),
    ],
)
def test_bad_input_fails_before_any_model_call(args, message, tmp_path):
    result = runner.invoke(app, [*args, "--out", str(tmp_path / "x")])
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())
    assert not (tmp_path / "x").exists()


# `rlmkit demo` shares this plumbing (a generated suite, a scored, logged run); here it runs with a
# scripted root in place of the embedded model, which the demo uses when --lm is not given.
FIND_THE_NEEDLE = """```repl
import re
key = re.search(r"for (\\S+) mentioned", question).group(1)
values = re.findall("for " + re.escape(key) + r" is: (\\d+)", context)
print(values)
SUBMIT(answer=values[0])
```"""


def test_demo_shows_turns_scores_and_writes_the_trajectory(tmp_path):
    import rlmkit

    with ScriptedServer(lambda body: FIND_THE_NEEDLE if is_root_request(body) else "x") as srv:
        result = runner.invoke(
            app,
            [
                "demo",
                "--lm",
                "openai/scripted",
                "--api-base",
                srv.url,
                "--length",
                "20000",
                "--out",
                str(tmp_path),
            ],
        )
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "turn 1" in text and "SUBMIT(answer=values[0])" in text
    assert "score: 1.000" in text and "rlmkit eval" in text
    runs = rlmkit.TrajectoryLog(next(tmp_path.iterdir())).runs()
    assert len(runs) == 1 and runs[0].score == 1.0 and runs[0].meta.task["demo"] is True
    assert str(next(tmp_path.iterdir())) in text


def test_eval_runs_the_plain_rlm_beside_the_suites_program(server, tmp_path, monkeypatch):
    from programs.suite_programs import SPECS

    monkeypatch.setenv("RLMKIT_CACHE_DIR", str(tmp_path / "cache"))  # every prompt reaches the server
    before = len(server.requests)
    result = run(server, tmp_path / "both", "--plain")
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if "│" in line]
    assert any(" program " in line for line in lines) and any(" plain " in line for line in lines)
    summary = json.loads((tmp_path / "both" / "summary.json").read_text())
    assert summary["summary"]["n"] == 3 and summary["plain"]["n"] == 3 and summary["baseline"] is None
    systems = {b["messages"][0]["content"] for b in server.requests[before:] if is_root_request(b)}
    with_strategy = [text for text in systems if SPECS["needle"].instructions in text]
    neutral = [text for text in systems if "Given the fields `context`, `question`, produce" in text]
    assert with_strategy and neutral and not set(with_strategy) & set(neutral)
    again = run(server, tmp_path / "both", "--plain")  # resumes both: nothing runs twice
    assert again.exit_code == 0 and "6 finished run(s) kept" in " ".join(again.output.split())


def test_lm_cache_gives_a_measurement_its_own_replies_or_none(server, tmp_path, monkeypatch):
    monkeypatch.setenv("RLMKIT_CACHE_DIR", str(tmp_path / "shared"))
    assert run(server, tmp_path / "first").exit_code == 0  # fills the shared cache
    before = len(server.requests)
    # a second measurement of the same model and prompts, in a cache of its own: every call is made
    own = run(server, tmp_path / "second", "--lm-cache", str(tmp_path / "own"))
    assert own.exit_code == 0, own.output
    made = len(server.requests) - before
    assert made == 3 and any((tmp_path / "own").iterdir())
    assert "answered from the LM cache" not in own.output
    # with the cache off, the same again: nothing is replayed, nothing is written
    off = run(server, tmp_path / "third", "--lm-cache", "off")
    assert off.exit_code == 0 and len(server.requests) - before == 2 * made
    # and the shared cache still answers a run that uses it, with no call made
    shared = run(server, tmp_path / "fourth")
    assert shared.exit_code == 0 and len(server.requests) - before == 2 * made
    # ... and says so: its rows count the replayed calls, and the command warns
    assert "3 of 3 model calls were answered from the LM cache" in " ".join(shared.output.split())
    assert "(1 of 1 calls from the cache)" in shared.output  # on each run's line of the log
    rows = [json.loads(line) for line in (tmp_path / "fourth" / "results.jsonl").read_text().splitlines()]
    assert [row["cached_calls"] for row in rows] == [1, 1, 1]


def test_an_eval_plan_refuses_flags_that_do_not_fit_before_any_model_starts():
    import pytest

    from programs.cli.eval_plan import plan
    from rlmkit.errors import UserError

    assert plan(suite="needle", max_tokens=5000, knob=None).knob == ()
    with pytest.raises(UserError, match="--n: Input should be greater than or equal to 1"):
        plan(suite="needle", n=0)
    with pytest.raises(UserError, match="apply to the embedded model only"):
        plan(suite="needle", lm="openai/x", adapter="a.gguf")
    with pytest.raises(UserError, match="--branch-from continues the program's runs"):
        plan(suite="needle", branch_from="runs/x", plain=True)
    with pytest.raises(ValueError):
        plan(suite="needle").model_copy(update={"n": 3}).__setattr__("n", 4)  # frozen

"""programs.branching through `rlmkit eval --branch-from`: failed runs continued from their last
turn against the scripted server, their prefix played back and checked."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import rlmkit
from optimizers.compile import compile_dpo
from programs.branching import FIRST_SAMPLE, PER_ORIGIN
from rlmkit.cli import app
from rlmkit.testing.server import ScriptedServer, is_root_request
from tests.helpers.replies import repl
from tests.tasks.test_evaluate import NEEDLE_ROOT

runner = CliRunner()
LOOK = repl("note = llm_query('say 4242')", "print(note, len(context))")


def turns_before(body: dict) -> int:
    return sum(m["role"] == "assistant" for m in body["messages"])


@pytest.fixture
def server():
    """Turn 0 looks (with a sub-call); turn 1 answers wrong until ``phase`` is "right"."""
    phase = {"now": "wrong"}

    def responder(body: dict) -> str:
        if not is_root_request(body):
            return "4242"
        if turns_before(body) == 0:
            return LOOK
        return repl('SUBMIT(answer=["wrong"])') if phase["now"] == "wrong" else NEEDLE_ROOT

    with ScriptedServer(responder) as srv:
        srv.phase = phase
        yield srv


def run(server, out, cache, *extra):
    args = ["eval", "needle", "--n", "2", "--length", "6000", "--seed", "4", "--lm", "openai/scripted",
            "--api-base", server.url, "--out", str(out), "--lm-cache", str(cache), "--max-iterations", "3",
            "--workers", "2", "--samples", "2", *extra]  # fmt: skip
    return runner.invoke(app, args)


def test_failed_runs_go_on_from_their_last_turn_after_their_prefix_played_back(server, tmp_path):
    first, cache = tmp_path / "first", tmp_path / "cache"
    assert run(server, first, cache).exit_code == 0
    origins = {r.meta.run_id: r for r in rlmkit.TrajectoryLog(first / "trajectories").runs()}
    assert len(origins) == 4 and all(r.score == 0.0 and r.n_turns == 2 for r in origins.values())

    server.phase["now"] = "right"
    sent_before = len(server.requests)
    result = run(server, tmp_path / "more", cache, "--branch-from", str(first), "--branch-below", "0.9")
    assert result.exit_code == 0, result.output
    sent = server.requests[sent_before:]
    # only the last turn went to the model: turn 0 was played back, its sub-call answered from the cache
    assert len(sent) == 8 and all(is_root_request(b) and turns_before(b) == 1 for b in sent)
    rows = [json.loads(line) for line in (tmp_path / "more" / "results.jsonl").read_text().splitlines()]
    assert sorted(r["sample"] for r in rows) == sorted(
        FIRST_SAMPLE + s * PER_ORIGIN + k for _ in range(2) for s in range(2) for k in range(2)
    )
    assert all(r["score"] == 1.0 for r in rows)
    for run_ in rlmkit.TrajectoryLog(tmp_path / "more" / "trajectories").runs():
        branch = run_.meta.task["branch"]
        origin = origins[branch["of"]]
        assert branch["turn"] == 1 and branch["sample"] == origin.meta.task["sample"]
        assert run_.meta.task["example_id"] == origin.meta.task["example_id"]  # one task, for splits
        assert run_.turn_messages(1) == origin.turn_messages(1)  # the same prefix, word for word
        assert run_.turns[0].reply == LOOK and run_.turns[1].reply != origin.turns[1].reply

    # each continued run and its continuations: a pair at the turn that decided the answer
    pairs = compile_dpo([first / "trajectories", tmp_path / "more" / "trajectories"]).rows
    assert len(pairs) == 4 and {row.id.rpartition(":branch:")[2] for row in pairs} == {
        f"{run_id}:pair" for run_id in origins
    }
    assert all(row.turn == 1 and row.score_chosen == 1.0 and row.score_rejected == 0.0 for row in pairs)
    assert all("wrong" in row.rejected[0].content and "wrong" not in row.chosen[0].content for row in pairs)

    # continued again with the same arguments: resumed, nothing sent
    sent_before = len(server.requests)
    again = run(server, tmp_path / "more", cache, "--branch-from", str(first), "--branch-below", "0.9")
    assert again.exit_code == 0 and len(server.requests) == sent_before


def test_a_prefix_that_does_not_come_back_ends_its_continuation(server, tmp_path):
    first, cache = tmp_path / "first", tmp_path / "cache"
    assert run(server, first, cache).exit_code == 0
    for path in (first / "trajectories").glob("*.jsonl"):  # as if the code had printed otherwise
        path.write_text(path.read_text().replace("4242 ", "4343 "))
    server.phase["now"] = "right"
    result = run(server, tmp_path / "more", cache, "--branch-from", str(first))
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (tmp_path / "more" / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 8 and all(r["status"] == "failed" and r["score"] == 0.0 for r in rows)
    assert all("PrefixNotReproduced" in r["error"] and "turn 1" in r["error"] for r in rows)


@pytest.mark.parametrize(
    "extra,code,said",
    [
        (["--max-iterations", "4"], 2, "another configuration"),  # its prompts could not come back
        (["--branch-below", "0.0"], 0, "nothing to continue"),  # every run scored at least 0
    ],
)
def test_nothing_is_sent_for_runs_of_other_arguments_or_none_to_continue(server, tmp_path, extra, code, said):
    first, cache = tmp_path / "first", tmp_path / "cache"
    assert run(server, first, cache).exit_code == 0
    sent = len(server.requests)
    result = run(server, tmp_path / "b", cache, "--branch-from", str(first), *extra)
    assert result.exit_code == code and said in result.output
    assert len(server.requests) == sent and not (tmp_path / "b").exists()

"""Compile real RLM runs (scripted model behind a real HTTP server), then replay the compiled data.

The strongest check of re-rendering: the replies compiled into protocol X, sent by a scripted
model to ``rlmkit.RLM(protocol=X)``, give the same answer, and the prompt compiled for X is
byte for byte the prompt the RLM really sends under X.
"""

from __future__ import annotations

import pytest

import rlmkit
from optimizers.compile import compile_dpo, compile_rl, compile_sft
from tests.helpers.script import Script

SIGNATURE = "context, question -> answer: int"
CONTEXT = "apple pear apple " * 50
EXPLORE = "```repl\nchunk = context[:60]\nprint(llm_query('count apples in: ' + chunk))\n```"
# the templated mistakes RLM-Qwen3-8B's data needed fixing: quoted name, text after the call
FINISH_WITH_MISTAKES = "```repl\nn = context.count('apple')\n```\nFINAL_VAR(\"n\") -- counted with code."
WRONG_FINISH = "```repl\nn = context.count('pear')\n```\nFINAL_VAR(n)"


@pytest.fixture(scope="module")
def logged_runs(tmp_path_factory):
    """Three real runs of the `final` protocol logged to JSONL: two right answers, one wrong."""
    from rlmkit.testing import ScriptedServer

    log_dir = tmp_path_factory.mktemp("rlm_runs")
    for finish in (FINISH_WITH_MISTAKES, FINISH_WITH_MISTAKES, WRONG_FINISH):
        server = ScriptedServer(Script([EXPLORE, finish], sub=lambda prompt: "4")).start()
        try:
            lm = rlmkit.LM("openai/scripted", api_base=server.url, api_key="test-key", cache=False)
            rlm = rlmkit.RLM(SIGNATURE, lm=lm, protocol="final", log_dir=log_dir)
            task = {"suite": "fruit", "example_id": "apples-1", "gold": 100}  # what an eval harness records
            rlm(context=CONTEXT, question="How many apples?", _task=task)
        finally:
            server.stop()
    return log_dir


def right_answer(run) -> float:
    return float((run.outputs or {}).get("answer") == run.meta.task["gold"])


@pytest.mark.parametrize("target", ["final", "submit", "answer"])
def test_compiled_replies_run_in_the_target_protocol(logged_runs, serve, target):
    result = compile_sft(logged_runs, metric=right_answer, protocol=target, subcalls=True)
    report = result.report
    assert report.runs_read == 3 and report.runs_dropped == {"zero_score": 1} and report.bad_lines == 0
    assert report.fixes["final_var_quoted"] == 2 and report.fixes["final_trailing_text"] == 2
    root = sorted((row for row in result.rows if row.meta["role"] == "root"), key=lambda row: row.turn)
    subs = [row for row in result.rows if row.meta["role"] == "subcall"]
    assert [row.turn for row in root] == [0, 1]  # the twin run's samples were deduplicated
    assert subs and subs[0].prompt[0].content.startswith("count apples in: apple pear")
    assert subs[0].completion[0].content == "4"

    replies = [row.completion[0].content for row in root]
    server, lm = serve(Script(replies, sub=lambda prompt: "4"))
    pred = rlmkit.RLM(SIGNATURE, lm=lm, protocol=target)(context=CONTEXT, question="How many apples?")
    assert pred.answer == 100 and pred.trajectory.status == "ok"
    sent = server.requests[0]["messages"]
    assert [m.model_dump(exclude_none=True) for m in root[0].prompt] == sent


def test_real_runs_compile_to_rl_groups_and_a_dpo_pair(logged_runs):
    rl = compile_rl(logged_runs, metric=right_answer, scorer="tests.scoring:count")
    (prompt,) = rl.rows
    assert prompt.task_id == "fruit/apples-1" and prompt.answer == "100" and prompt.reward.suite == "fruit"
    assert prompt.reward.scorer == "tests.scoring:count"
    assert sorted(row.reward for row in rl.extra_rows) == [0.0, 1.0, 1.0]
    assert len({row.group_id for row in rl.extra_rows}) == 1
    dpo = compile_dpo(logged_runs, metric=right_answer)
    (pair,) = dpo.rows
    assert (
        pair.turn == 1
        and "count('apple')" in pair.chosen[0].content
        and "count('pear')" in pair.rejected[0].content
    )

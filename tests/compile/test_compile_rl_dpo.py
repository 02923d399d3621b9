"""RL prompts + offline GRPO groups, and DPO preference pairs."""

from __future__ import annotations

import json
import statistics

import pytest

from optimizers.compile import EmptyDatasetError, compile_dpo, compile_rl, group_advantages
from rlmkit.errors import UserError
from rlmkit.testing.synthetic_runs import make_run


def rollouts(task, scores, protocol="submit", **kw):
    return [make_run(protocol, task=task, score=s, variant=i, **kw) for i, s in enumerate(scores)]


# ------------------------------------------------------------------ RL
def test_group_advantages_are_grpo_normalised():
    rewards = [1.0, 0.0, 0.5, 1.0]
    advantages = group_advantages(rewards)
    mean, std = statistics.mean(rewards), statistics.stdev(rewards)
    assert advantages == pytest.approx([(r - mean) / (std + 1e-4) for r in rewards])
    assert sum(advantages) == pytest.approx(0.0, abs=1e-9)
    assert group_advantages(rewards, scale=False) == pytest.approx([r - mean for r in rewards])
    assert group_advantages([0.7, 0.7, 0.7]) == [0.0, 0.0, 0.0]


def test_rl_rows_carry_prompt_gold_and_reward_spec():
    runs = rollouts("a", [1.0, 0.0, 0.0, 1.0], answer=17) + rollouts("b", [0.5, 0.5], answer=3)
    result = compile_rl(runs)
    prompts = {row.task_id: row for row in result.rows}
    assert set(prompts) == {"records/a", "records/b"}
    row = prompts["records/a"]
    assert json.loads(row.answer) == 17
    assert row.reward.scorer == "programs.tasks.records:score" and row.reward.suite == "records"
    assert row.reward.knobs == {"n_records": 357}
    assert [m.role for m in row.prompt] == ["system", "user"]
    assert row.prompt[0].content == runs[0].turns[0].new_messages[0].content
    assert row.example["example_id"] == "a" and "gold" not in row.example
    assert row.example["inputs"][0]["name"] == "context" and "sha256" in row.example["inputs"][0]


def test_rl_groups_hold_every_rollout_with_its_advantage():
    runs = rollouts("a", [1.0, 0.0, 0.0, 1.0]) + rollouts("b", [0.5, 0.5])
    groups = compile_rl(runs).extra_rows
    by_run = {row.run_id: row for row in groups}
    assert len(groups) == 6
    for run in runs:
        row = by_run[run.meta.run_id]
        assert row.reward == run.score
        assert row.completion[-1].content == run.turns[-1].reply and row.completion[-1].role == "assistant"
        assert [m.role for m in row.completion] == ["assistant", "user"] * (run.n_turns - 1) + ["assistant"]
    a = [row.advantage for row in groups if row.task_id == "records/a"]
    assert a == pytest.approx([0.866, -0.866, -0.866, 0.866], abs=1e-3)
    assert {row.advantage for row in groups if row.task_id == "records/b"} == {0.0}
    assert len({row.group_id for row in groups}) == 2


def test_zero_advantage_and_small_groups_are_dropped_on_request():
    runs = rollouts("a", [1.0, 0.0]) + rollouts("b", [0.5, 0.5, 0.5]) + rollouts("c", [1.0])
    result = compile_rl(runs, drop_zero_advantage=True)
    assert {row.task_id for row in result.extra_rows} == {"records/a"}
    assert result.report.samples_dropped["zero_advantage_group"] == 3
    assert result.report.samples_dropped["group_too_small"] == 1
    assert len(result.rows) == 3  # prompts of every example stay: rewards are computed online


def test_rl_needs_a_scorer_and_scores():
    runs = rollouts("a", [1.0, 0.0])
    for run in runs:
        run.meta.task.pop("scorer")
    with pytest.raises(UserError, match="scorer='module:function'"):
        compile_rl(runs)
    assert compile_rl(runs, scorer="my.module:score").rows[0].reward.scorer == "my.module:score"
    unscored = rollouts("a", [None, None])
    with pytest.raises(EmptyDatasetError, match="no_score"):
        compile_rl(unscored)
    result = compile_rl(unscored, metric=lambda run: float(run.meta.run_id < "8"))
    assert len(result.extra_rows) == 2


def test_rl_rerenders_rollouts_into_the_target_protocol():
    runs = rollouts("a", [1.0, 0.0], protocol="final", mistake="final_var_quoted")
    result = compile_rl(runs, protocol="answer")
    for row in result.extra_rows:
        assert row.completion[-1].content.endswith('answer["ready"] = True\n```')
        assert "FINAL" not in row.prompt[0].content
    assert result.report.fixes["converted:final->answer"] == 2


# ------------------------------------------------------------------ DPO
def test_dpo_pairs_best_and_worst_with_cost_breaking_ties():
    runs = [
        make_run(task="a", score=1.0, variant=1, cost=0.9),
        make_run(task="a", score=1.0, variant=2, cost=0.1),  # best: same score, cheaper
        make_run(task="a", score=0.0, variant=3, cost=0.1),
        make_run(task="a", score=0.0, variant=4, cost=0.5),  # worst: same score, dearer
    ]
    row = compile_dpo(runs, mode="conversation").rows[0]
    assert row.run_id == runs[1].meta.run_id and row.meta["rejected_run_id"] == runs[3].meta.run_id
    assert (row.score_chosen, row.score_rejected) == (1.0, 0.0)
    assert row.chosen[-1].content == runs[1].turns[-1].reply
    assert row.rejected[-1].content == runs[3].turns[-1].reply
    assert [m.role for m in row.prompt] == ["system", "user"]


def test_dpo_per_turn_pairs_the_first_turn_where_the_same_prompt_got_different_replies():
    good, bad = make_run(task="a", score=1.0, variant=5), make_run(task="a", score=0.2, variant=5)
    bad.turns[1].reply = "```repl\nprint(context)  # reads everything at once\n```"
    for later in bad.turns[2:]:
        later.new_messages[0].content = "REPL output:\n(a flood of text)"
    row = compile_dpo([good, bad]).rows[0]
    assert row.turn == 1
    assert row.prompt[-1].content == good.turn_messages(1)[-1].content
    assert row.chosen[0].content == good.turns[1].reply and row.rejected[0].content == bad.turns[1].reply


def test_a_right_score_not_earned_is_never_the_chosen_ending():
    """A dump holding the gold scores 1.0 by containment; against a run that read the answer it
    is the rejected side, and two such runs make no pair at all."""
    read, dump, wrong = (
        make_run(task="a", variant=1),
        make_run(task="a", variant=2),
        make_run(task="a", score=0.0),
    )
    dump.outputs = {"answer": "record: alpha " * 20 + "42"}
    row = compile_dpo([read, dump], mode="conversation").rows[0]
    assert row.run_id == read.meta.run_id and row.meta["rejected_run_id"] == dump.meta.run_id
    assert (row.score_chosen, row.score_rejected) == (1.0, 0.0)
    assert row.meta["rejected_unearned"] == "answer_padded"
    with pytest.raises(EmptyDatasetError, match="no_score_gap"):
        compile_dpo([dump, wrong], mode="conversation")


def test_dpo_drops_examples_without_a_preference():
    same = rollouts("a", [1.0, 1.0])
    single = rollouts("b", [1.0])
    with pytest.raises(EmptyDatasetError) as info:
        compile_dpo(same + single)
    assert "no_score_gap" in str(info.value) and "single_run" in str(info.value)
    close = rollouts("c", [1.0, 0.9])
    assert len(compile_dpo(close).rows) == 1
    with pytest.raises(EmptyDatasetError, match="no_score_gap"):
        compile_dpo(close, min_margin=0.2)

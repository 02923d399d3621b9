"""Arms run interleaved, bounded by turns and tokens: the same arm twice scores the same on a
machine slowed at random, and a run the wall-time fault guard stops twice is cut, not scored 0."""

from __future__ import annotations

import random
import time

import rlmkit
from optimizers.cli.release import EmbeddedArms, sealed_examples
from optimizers.selftrain import SuitePlan
from optimizers.selftrain.interleaved import Outcome, run_interleaved, suite_table
from optimizers.selftrain.rounds import SealedTestPlan

LOOK = "```repl\nprint(question)\n```"
WRONG = "```repl\nSUBMIT(answer=['1'])\n```"
PLAN = SealedTestPlan(seed=5000, iterations=4, max_tokens=200_000, max_seconds=60,
                suites=(SuitePlan(suite="needle", length=2_000, n=4),))  # fmt: skip


def scripted(arm: str, *, jitter: random.Random | None = None, slow_on: str | None = None, pause: float = 0):
    """``reader`` looks, then submits the gold of the question it was asked (the test's oracle:
    what is measured here is the harness, not reading); ``guesser`` answers the questions of odd
    length right and guesses on the others. ``jitter`` sleeps a random time before each reply (a
    loaded machine); ``slow_on``: every reply on the example whose question holds it takes
    ``pause`` seconds."""
    golds = {e.inputs["question"]: e.gold for e in sealed_examples(PLAN.suites[0], PLAN.seed)}

    def reply(messages):
        if jitter is not None:
            time.sleep(jitter.uniform(0, 0.02))
        text = " ".join(str(m.get("content", "")) for m in messages)
        if slow_on and slow_on in text:
            time.sleep(pause)
        if sum(m["role"] == "assistant" for m in messages) == 0:
            return LOOK
        question = next((q for q in golds if q in text), None)
        if question is None or (arm == "guesser" and len(question) % 2 == 0):
            return WRONG
        return f"```repl\nSUBMIT(answer={golds[question]!r})\n```"

    return rlmkit.FunctionLM(reply)


def scores(rows):
    return [(row.arm, row.id, row.score, row.status, row.turns) for row in rows]


def test_arms_run_example_by_example_and_each_row_records_turns_tokens_and_seconds():
    order = []

    def run_one(arm, example):
        order.append((arm, example.id))
        return Outcome(score=1.0, turns=2, tokens=30, seconds=0.1)

    examples = sealed_examples(PLAN.suites[0], PLAN.seed)
    rows = run_interleaved(["base", "round3"], examples, run_one)
    assert order == [(arm, e.id) for e in examples for arm in ("base", "round3")]
    assert {(row.turns, row.tokens, row.seconds, row.status) for row in rows} == {(2, 30, 0.1, "scored")}


def test_the_same_arm_twice_gives_identical_scores_even_when_the_machine_is_slowed_at_random():
    examples = sealed_examples(PLAN.suites[0], PLAN.seed)
    arms = ("reader", "guesser")

    def measure(seed):
        runner = EmbeddedArms(PLAN, {}, lm_for=lambda arm: scripted(arm, jitter=random.Random(seed)))
        return run_interleaved(arms, examples, runner)

    first, second = measure(1), measure(2)  # different sleeps before every reply
    assert scores(first) == scores(second)
    assert {row.score for row in first if row.arm == "reader"} == {1.0}
    assert 0 < sum(row.score for row in first if row.arm == "guesser") < len(examples)  # scores that differ
    assert all(row.turns == 2 and row.tokens > 0 for row in first)
    table = suite_table("needle-2k", "needle", arms, first)
    assert table["scored"] == {"reader": 4, "guesser": 4} and table["cut"] == {"reader": 0, "guesser": 0}


def test_a_run_the_guard_stops_twice_is_cut_reported_apart_and_left_out_of_the_mean():
    examples = sealed_examples(PLAN.suites[0], PLAN.seed)
    slow = examples[0].inputs["question"]  # only its replies are slow
    # The guard is far above a normal run here (a few ms of scripted replies) and far below the
    # slowed example's, so a loaded machine cuts only the run this test slows.
    guarded = PLAN.model_copy(update={"max_seconds": 3.0})
    calls = []

    def lm_for(arm):
        return scripted(arm, slow_on=slow if arm == "guesser" else None, pause=4.0)

    runner = EmbeddedArms(guarded, {}, lm_for=lm_for)
    rows = run_interleaved(
        ("reader", "guesser"), examples, lambda a, e: calls.append((a, e.id)) or runner(a, e)
    )
    [cut] = [row for row in rows if row.status == "cut"]
    assert (cut.arm, cut.id, cut.score, cut.attempts) == ("guesser", examples[0].id, None, 2)
    assert calls.count(("guesser", examples[0].id)) == 2  # run again once, then cut
    table = suite_table("needle-2k", "needle", ("reader", "guesser"), rows)
    assert table["cut"] == {"reader": 0, "guesser": 1} and table["scored"] == {"reader": 4, "guesser": 3}
    assert table["n"] == 3  # the cut example is in no arm's mean: the pairs stay pairs
    assert table["means"]["reader"] == 1.0


def test_a_run_the_guard_stops_once_is_run_again_and_scored():
    examples = sealed_examples(PLAN.suites[0], PLAN.seed)[:1]
    outcomes = iter([Outcome(guard_hit=True), Outcome(score=1.0, turns=2, tokens=9, seconds=1.0)])
    [row] = run_interleaved(["base"], examples, lambda arm, example: next(outcomes))
    assert (row.status, row.score, row.attempts) == ("scored", 1.0, 2)


def test_a_stopped_comparison_resumes_from_its_rows_file(tmp_path):
    examples = sealed_examples(PLAN.suites[0], PLAN.seed)
    ran = []

    def run_one(arm, example):
        ran.append((arm, example.id))
        return Outcome(score=0.5, turns=1, tokens=3, seconds=0.0)

    rows_file = tmp_path / "rows.jsonl"
    first = run_interleaved(["a", "b"], examples[:2], run_one, rows_file=rows_file)
    again = run_interleaved(["a", "b"], examples, run_one, rows_file=rows_file)
    assert len(ran) == 8 and again[:4] == first  # the first two examples were not run again

"""The shared-context family: groups of questions over one context, evaluated one session per
context and scored per question."""

from __future__ import annotations

import rlmkit
from programs import evaluate
from programs.tasks import generate
from rlmkit.trajectory import read_runs


def test_a_group_shares_one_context_object_and_asks_different_questions():
    examples = generate("shared_context", n=6, length=20_000, seed=1, questions=3)
    groups = [e.meta["context_group"] for e in examples]
    assert groups == ["shared_context-1-0"] * 3 + ["shared_context-1-1"] * 3
    assert examples[0].inputs["context"] is examples[2].inputs["context"]
    assert examples[0].context != examples[3].context
    assert len({e.inputs["question"] for e in examples[:3]}) == 3
    # a group's context does not depend on how many examples were asked for
    assert (
        generate("shared_context", n=1, length=20_000, seed=1, questions=3)[0].context == examples[0].context
    )


def test_eval_runs_each_context_in_one_session_and_scores_each_question(tmp_path):
    examples = generate("shared_context", n=6, length=20_000, seed=2, questions=3)
    golds = {e.inputs["question"]: e.gold for e in examples}

    def model(messages):
        line = next(x for x in messages[1]["content"].splitlines() if x.startswith("- `question`"))
        question = max((q for q in golds if q[:50] in line), key=lambda q: len(q) if q in line else 0)
        return f"```repl\nasked = globals().get('asked', 0) + 1\nSUBMIT(answer={str(golds[question])!r})\n```"

    rlm = rlmkit.RLM("context, question -> answer", lm=rlmkit.FunctionLM(model))
    result = evaluate(rlm, examples, workers=2, out_dir=tmp_path / "run")
    assert [row.score for row in result.rows] == [1.0] * 6
    found = [
        run for path in (tmp_path / "run" / "trajectories").glob("*.jsonl") for run in read_runs(path)[0]
    ]
    runs = {run.meta.task["example_id"]: run for run in found}
    sessions = [runs[e.id].meta.session for e in examples]
    assert [s["call"] for s in sessions] == [1, 2, 3, 1, 2, 3]
    assert len({s["id"] for s in sessions[:3]}) == 1 and len({s["id"] for s in sessions}) == 2


def test_a_group_never_asks_the_same_question_twice():
    """Each question is drawn on its own; over a few records two draws can coincide (seed 231 at
    5,592 characters drew one question twice), so a group redraws until its questions differ."""
    for seed in (231, *range(40)):
        examples = generate("shared_context", n=8, length=5_592, seed=seed)
        for group in {e.meta["context_group"] for e in examples}:
            questions = [e.inputs["question"] for e in examples if e.meta["context_group"] == group]
            assert len(set(questions)) == len(questions), (seed, questions)

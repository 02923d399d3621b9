"""Programs move between dspy.RLM and rlmkit.RLM: a state saved from dspy.RLM loads (its
instructions and demos on the root predictor), and a program DSPy's optimizers tuned saves and
loads with what they tuned."""

from __future__ import annotations

import logging

import dspy

import rlmkit
from tests.dspy_compat.test_dspy_optimizers import GOOD, KEYWORD, secret_examples, secret_metric, setup  # noqa: F401


def saved_dspy_rlm(tmp_path, signature, instructions=None, demos=()):
    program = dspy.RLM(signature)
    if instructions is not None:
        program.generate_action.signature = program.generate_action.signature.with_instructions(instructions)
    program.generate_action.demos = [dspy.Example(**d) for d in demos]
    path = tmp_path / "dspy_rlm.json"
    program.save(str(path))
    return path


def test_a_tuned_dspy_rlm_program_loads_onto_the_root_predictor(tmp_path, caplog):
    demos = [
        {"question": "q", "answer": "a"},
        {"variables_info": "v", "repl_history": "h", "reasoning": "r", "code": "c"},
    ]
    path = saved_dspy_rlm(tmp_path, "question -> answer", instructions="Always check twice.", demos=demos)
    rlm = rlmkit.RLM("question -> answer")
    with caplog.at_level(logging.WARNING, logger="rlmkit"):
        rlm.load(str(path))
    assert rlm.instructions == "Always check twice."
    assert [dict(d) for d in rlm.demos] == [{"question": "q", "answer": "a"}]
    assert "1 action-step demo(s)" in caplog.text


def test_an_untuned_dspy_rlm_program_keeps_the_task_instructions(tmp_path):
    class Task(dspy.Signature):
        """Find the secret."""

        context: str = dspy.InputField()
        answer: str = dspy.OutputField()

    rlm = rlmkit.RLM(Task)
    rlm.load(str(saved_dspy_rlm(tmp_path, Task)))
    assert rlm.instructions == "Find the secret."


def test_rlmkit_state_round_trips(tmp_path):
    rlm = rlmkit.RLM("question -> answer", instructions="Tuned.", max_iters=6, max_llm_calls=9)
    rlm.save(str(tmp_path / "p.json"))
    loaded = rlmkit.RLM("question -> answer")
    loaded.load(str(tmp_path / "p.json"))
    assert (loaded.instructions, loaded.max_iters, loaded.max_llm_calls) == ("Tuned.", 6, 9)


def test_gepa_feedback_reaches_the_root_and_the_optimised_program_saves_and_loads(setup, tmp_path):  # noqa: F811
    responder, student, helper_lm = setup([GOOD])

    def metric(gold, pred, trace=None, pred_name=None, pred_trace=None):
        score = secret_metric(gold, pred)
        feedback = "correct" if score else f"wrong: {pred.answer} is the decoy, the secret is {gold.answer}"
        return dspy.Prediction(score=score, feedback=feedback)

    optimizer = dspy.GEPA(
        metric=metric, reflection_lm=helper_lm, max_metric_calls=24, reflection_minibatch_size=2,
        use_merge=False, num_threads=1, seed=0,
    )  # fmt: skip
    compiled = optimizer.compile(
        student, trainset=secret_examples(3, seed=3), valset=secret_examples(3, seed=4)
    )
    assert KEYWORD in compiled.instructions
    compiled.save(str(tmp_path / "gepa.json"))
    loaded = rlmkit.RLM("context, question -> answer: int", lm=student.lm, sandbox="inline", max_iterations=3)
    loaded.load(str(tmp_path / "gepa.json"))
    assert loaded.instructions == compiled.instructions
    example = secret_examples(1, seed=123)[0]
    assert loaded(**example.inputs()).answer == example.answer  # the tuned instructions steer the root

"""DSPy's own optimizers compile an rlmkit.RLM through ``named_predictors()``, and what they tune
(instructions, demos) is what the root model sees in later runs.

One scripted server plays both models: root requests (the RLM) get the keyword-dependent
replies of ``KeywordResponder``; every other request comes from a DSPy optimizer's own
predictors (MIPROv2's proposer, GEPA's reflection) and is answered in ChatAdapter format,
filling each requested output field with the next proposal.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re

import dspy
import pytest

import rlmkit
from optimizers.tuner.scripted import KEYWORD, KeywordResponder, secret_examples, secret_metric
from rlmkit.testing import is_root_request

GOOD = f"Look at the data first, then {KEYWORD} for the value asked for."
OUTPUT_FIELDS = re.compile(r"Your output fields are:\n(.*?)(?:\n\n|\Z)", re.DOTALL)


class OptimizerResponder:
    """Root requests -> KeywordResponder; DSPy predictor requests -> ChatAdapter replies."""

    def __init__(self, proposals):
        self.root = KeywordResponder()
        self.proposals = itertools.cycle(proposals)
        self.dspy_requests: list[dict] = []

    def __call__(self, body):
        if is_root_request(body):
            return self.root(body)
        self.dspy_requests.append(body)
        system = str(body["messages"][0]["content"])
        block = OUTPUT_FIELDS.search(system)
        names = re.findall(r"`(\w+)`", block.group(1)) if block else ["new_instruction"]
        proposal = next(self.proposals)
        if "Outputs will be a JSON object" in system:  # JSONAdapter (GEPA's proposer uses it)
            return json.dumps({name: proposal for name in names})
        return "\n\n".join(f"[[ ## {name} ## ]]\n{proposal}" for name in names) + "\n\n[[ ## completed ## ]]"


@pytest.fixture
def setup(serve):
    def make(proposals, instructions="Answer the question."):
        responder = OptimizerResponder(proposals)
        server, lm = serve(responder)
        student = rlmkit.RLM(
            "context, question -> answer: int",
            lm=lm,
            sandbox="inline",
            max_iterations=3,
            instructions=instructions,
        )
        helper_lm = dspy.LM("openai/scripted", api_base=server.url, api_key="test", cache=False)
        return responder, student, helper_lm

    return make


def _run_and_get_system_prompt(program, responder):
    example = secret_examples(1, seed=123)[0]
    before = len(responder.root.root_requests)
    prediction = program(**example.inputs())
    return prediction, example, responder.root.root_requests[before]["messages"][0]["content"]


def test_bootstrap_fewshot_fills_the_root_demos_and_they_reach_the_prompt(setup):
    responder, student, helper_lm = setup([GOOD], instructions=GOOD)  # the teacher succeeds
    trainset = secret_examples(4)
    optimizer = dspy.BootstrapFewShot(metric=secret_metric, max_bootstrapped_demos=2, max_labeled_demos=0)
    with dspy.context(lm=helper_lm):
        compiled = optimizer.compile(student, trainset=trainset)

    demos = dict(compiled.named_predictors())["root"].demos
    assert len(demos) == 2 and all(demo.get("augmented") for demo in demos)
    assert {demo["answer"] for demo in demos} <= {ex.answer for ex in trainset}
    assert all(len(demo["context"]) <= 2_005 for demo in demos)  # long inputs are cut in the trace
    assert student.root.demos == []  # the student itself is left alone

    prediction, example, system = _run_and_get_system_prompt(compiled, responder)
    assert "Worked examples" in system and f"answer: {demos[0]['answer']}" in system
    assert prediction.answer == example.answer


def test_mipro_v2_tunes_the_root_instructions(setup):
    responder, student, helper_lm = setup(["Answer quickly.", GOOD, "Be brief."])
    trainset, valset = secret_examples(4, seed=1), secret_examples(4, seed=2)
    optimizer = dspy.MIPROv2(
        metric=secret_metric,
        prompt_model=helper_lm,
        task_model=helper_lm,
        auto=None,
        num_candidates=3,
        num_threads=1,
        verbose=False,
        seed=0,
    )
    compiled = optimizer.compile(
        student,
        trainset=trainset,
        valset=valset,
        num_trials=6,
        max_bootstrapped_demos=0,
        max_labeled_demos=0,
        minibatch=False,
        program_aware_proposer=False,
        data_aware_proposer=False,
        tip_aware_proposer=False,
        fewshot_aware_proposer=False,
    )
    assert KEYWORD in compiled.instructions and KEYWORD not in student.instructions
    assert responder.dspy_requests  # the proposer really asked the model

    prediction, example, system = _run_and_get_system_prompt(compiled, responder)
    assert KEYWORD in system and prediction.answer == example.answer


def test_gepa_reflects_on_rlm_traces_and_rewrites_the_root_instructions(setup):
    responder, student, helper_lm = setup([GOOD])

    def metric(gold, pred, trace=None, pred_name=None, pred_trace=None):
        score = secret_metric(gold, pred)
        feedback = "correct" if score else f"wrong: {pred.answer} is the decoy, the secret is {gold.answer}"
        return dspy.Prediction(score=score, feedback=feedback)

    trainset, valset = secret_examples(3, seed=3), secret_examples(3, seed=4)
    optimizer = dspy.GEPA(
        metric=metric,
        reflection_lm=helper_lm,
        max_metric_calls=24,
        reflection_minibatch_size=2,
        use_merge=False,
        num_threads=1,
        seed=0,
    )
    compiled = optimizer.compile(student, trainset=trainset, valset=valset)
    assert compiled.instructions.strip() == GOOD
    reflection = [r for r in responder.dspy_requests if "wrong:" in str(r["messages"])]
    assert reflection, "GEPA's reflection should have seen the metric's feedback on RLM runs"

    prediction, example, system = _run_and_get_system_prompt(compiled, responder)
    assert KEYWORD in system and prediction.answer == example.answer


# -- runs that run out: a scored failure with their trajectory, not a lost example -----------
SLOW = "(this one times out)"


def timing_out(root: KeywordResponder) -> rlmkit.LM:
    """The scripted root model, except that on a question marked SLOW it answers its first turn
    and then never again: the run's deadline stops it with one turn in its trajectory."""

    async def answer(messages):
        if SLOW in str(messages[1]["content"]) and any(m["role"] == "assistant" for m in messages):
            await asyncio.Event().wait()
        return root({"messages": messages})

    return rlmkit.FunctionLM(answer)


def some_time_out(examples):
    """Every second example marked SLOW."""
    slow = [dspy.Example(**{**ex.toDict(), "question": f"{ex.question} {SLOW}"}) for ex in examples]
    return [slow[i].with_inputs("context", "question") if i % 2 else ex for i, ex in enumerate(examples)]


def deadline_student(responder, instructions="Answer the question."):
    return rlmkit.RLM(
        "context, question -> answer: int",
        lm=timing_out(responder.root),
        sandbox="inline",
        max_iterations=3,
        budget=rlmkit.Budget(max_seconds=1.0),
        instructions=instructions,
    )


def test_outside_an_optimizer_a_run_past_its_deadline_raises_with_its_trajectory(setup):
    responder, _, _ = setup([GOOD])
    example = some_time_out(secret_examples(2, seed=7))[1]
    with pytest.raises(rlmkit.errors.BudgetExceeded) as ran_out:
        deadline_student(responder, instructions=GOOD)(**example.inputs())
    assert ran_out.value.kind == "seconds" and len(ran_out.value.trajectory.turns) == 1


def test_gepa_reflects_on_runs_that_hit_their_deadline(setup):
    responder, _, helper_lm = setup([GOOD])
    student = deadline_student(responder)
    seen = []

    def metric(gold, pred, trace=None, pred_name=None, pred_trace=None):
        run = pred.trajectory
        seen.append((run.status, len(run.turns), pred.answer))
        if run.status != "ok":
            feedback = f"the run ended {run.status} after {len(run.turns)} turn(s): {run.error}"
        else:
            feedback = "correct" if secret_metric(gold, pred) else f"wrong: the secret is {gold.answer}"
        return dspy.Prediction(score=secret_metric(gold, pred), feedback=feedback)

    optimizer = dspy.GEPA(
        metric=metric,
        reflection_lm=helper_lm,
        max_metric_calls=12,
        reflection_minibatch_size=2,
        use_merge=False,
        num_threads=1,
        seed=0,
    )
    trainset, valset = some_time_out(secret_examples(2, seed=5)), secret_examples(2, seed=6)
    compiled = optimizer.compile(student, trainset=trainset, valset=valset)
    assert ("budget_exceeded", 1, None) in seen  # scored: answer None, the one turn it took kept
    reflected = [r for r in responder.dspy_requests if "ended budget_exceeded after 1 turn(s)" in str(r)]
    assert reflected, "GEPA's reflection should have read the feedback on the run that timed out"
    assert compiled.instructions.strip() == GOOD


def test_bootstrap_fewshot_skips_a_run_that_hit_its_deadline_and_counts_no_error(setup):
    responder, _, helper_lm = setup([GOOD])
    student = deadline_student(responder, instructions=GOOD)
    trainset = some_time_out(secret_examples(4, seed=8))  # examples 1 and 3 time out
    optimizer = dspy.BootstrapFewShot(
        metric=secret_metric, max_bootstrapped_demos=2, max_labeled_demos=0, max_errors=1
    )
    with dspy.context(lm=helper_lm):
        compiled = optimizer.compile(student, trainset=trainset)  # one raised error would abort it
    demos = dict(compiled.named_predictors())["root"].demos
    assert len(demos) == 2 and all(SLOW not in demo["question"] for demo in demos)
    assert {demo["answer"] for demo in demos} == {trainset[0].answer, trainset[2].answer}

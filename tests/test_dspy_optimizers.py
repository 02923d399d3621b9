"""DSPy's own optimizers compile an rlmkit.RLM through ``named_predictors()``, and what they tune
(instructions, demos) is what the root model sees in later runs.

One scripted server plays both models: root requests (the RLM) get the keyword-dependent
replies of ``KeywordResponder``; every other request comes from a DSPy optimizer's own
predictors (MIPROv2's proposer, GEPA's reflection) and is answered in ChatAdapter format,
filling each requested output field with the next proposal.
"""

from __future__ import annotations

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

"""Every model a run can call implements one contract (``rlmkit.models.contract``): a name, a
frozen traits record, ``acomplete`` and ``describe``; a run reads traits, never probes attributes,
and any object that implements the contract is used as it is."""

from __future__ import annotations

import dataclasses

import dspy
import pytest
from dspy.utils.dummies import DummyLM

import rlmkit
from optimizers.backends.verifiers_runtime import BridgeLM
from rlmkit.dspy_compat.predictors import ActionLM
from rlmkit.model_choice import resolve_lm
from rlmkit.models.contract import Completion, Model, ModelTraits
from rlmkit.models.lm import FunctionLM
from rlmkit.trajectory import Usage


def test_an_lm_states_its_settings_as_traits():
    lm = FunctionLM(lambda m: "x", max_tokens=64, stop="END", input_chars=900, preset={"instructions": "i"})
    assert lm.traits == ModelTraits(
        max_tokens=64, stop=("END",), preset={"instructions": "i"}, input_chars=900, reaches_network=False
    )
    assert rlmkit.LM("openai/gpt-4o-mini", api_key="test-not-a-real-key").traits.reaches_network


def test_dspy_models_say_whether_dspy_observes_their_calls():
    assert resolve_lm(DummyLM([{"answer": "a"}])).traits.observed_by_dspy
    assert not resolve_lm(lambda prompt: "a").traits.observed_by_dspy  # a plain callable reports nothing
    direct = resolve_lm(dspy.LM("openai/gpt-4o-mini", api_key="test-not-a-real-key"))
    assert not direct.traits.observed_by_dspy and direct.traits.reaches_network  # rlmkit reports its calls


@pytest.mark.parametrize(
    "make",
    [
        lambda: FunctionLM(lambda m: "x"),
        lambda: resolve_lm(DummyLM([{"answer": "a"}])),
        lambda: resolve_lm(dspy.LM("openai/gpt-4o-mini", api_key="test-not-a-real-key")),
        lambda: ActionLM(dspy.Predict("question -> answer"), 3),
        BridgeLM,
    ],
    ids=["function", "dspy-base-lm", "dspy-direct", "dspy-action", "verifiers-bridge"],
)
def test_every_shipped_model_implements_the_contract(make):
    model = make()
    assert isinstance(model, Model) and isinstance(model.traits, ModelTraits)
    assert set(model.describe()) >= {"model", "params", "transport", "cache"}


def test_traits_are_frozen_and_checked():
    with pytest.raises(dataclasses.FrozenInstanceError):
        ModelTraits().max_tokens = 5  # type: ignore[misc]
    with pytest.raises(ValueError, match="max_tokens"):
        ModelTraits(max_tokens=0)


class EchoModel:
    """A model written against the contract alone: no rlmkit base class."""

    model = "echo/model"
    traits = ModelTraits(max_tokens=32)

    def __init__(self) -> None:
        self.caps: list[int | None] = []

    async def acomplete(self, messages, *, max_tokens=None, **_):
        self.caps.append(max_tokens)
        return Completion("```repl\nSUBMIT(answer='echo')\n```", self.model, Usage(calls=1), False, 0.0)

    def describe(self) -> dict:
        return {"model": self.model, "params": {}, "transport": "echo", "cache": None}


def test_a_model_written_against_the_contract_runs_an_rlm_under_its_own_cap():
    model = EchoModel()
    assert resolve_lm(model) is model
    pred = rlmkit.RLM("question -> answer", lm=model)(question="q")
    assert pred.answer == "echo" and model.caps == [32]  # its trait cap beats the RLM's larger one

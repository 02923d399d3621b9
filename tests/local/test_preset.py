"""A model can ship a tuned program (``LM.preset``): an RLM with no instructions or demos of its
own runs it; one with its own, or with ``use_preset=False``, does not. The embedded model's
shipped program (if this build has one) is well-formed and says where it came from."""

from __future__ import annotations

import json

import pytest

import rlmkit
from rlmkit.local import SHIPPED_PROGRAM, shipped_program
from rlmkit.models.lm import FunctionLM
from rlmkit.protocols.base import BLOCK_END

PRESET = {
    "instructions": "PRESET-INSTRUCTIONS: search before you count.",
    "demos": [
        {"context": "a b c", "question": "how many?", "answer": "3", "transcript": "PRESET-DEMO-TRANSCRIPT"},
        {"unrelated_field": "x"},  # fields this signature lacks: not shown
    ],
    "knobs": {"blocks_per_turn": 1},
}


def model_with_preset(seen: list[dict]):
    def reply(messages, request):
        seen.append({"system": messages[0]["content"], "stop": request.stop or []})
        return "```repl\nSUBMIT(answer='ok')\n```"

    return FunctionLM(reply, preset=PRESET)


def test_an_rlm_without_a_program_of_its_own_runs_the_models_preset():
    seen: list[dict] = []
    pred = rlmkit.RLM("context, question -> answer", lm=model_with_preset(seen))(context="x", question="q")
    system = seen[0]["system"]
    assert "PRESET-INSTRUCTIONS" in system and "PRESET-DEMO-TRANSCRIPT" in system
    assert "unrelated_field" not in system
    assert BLOCK_END in seen[0]["stop"]  # the preset's knob
    assert pred.trajectory.meta.instructions == PRESET["instructions"]  # the trajectory says what ran
    assert pred.trajectory.meta.limits["blocks_per_turn"] == 1


@pytest.mark.parametrize(
    "own",
    [
        {"instructions": "MY OWN INSTRUCTIONS"},
        {"use_preset": False},
    ],
)
def test_own_instructions_or_use_preset_false_keep_the_preset_out(own):
    seen: list[dict] = []
    rlmkit.RLM("context, question -> answer", lm=model_with_preset(seen), **own)(context="x", question="q")
    assert "PRESET" not in seen[0]["system"] and BLOCK_END not in seen[0]["stop"]


def test_a_knob_the_user_set_wins_over_the_presets():
    seen: list[dict] = []
    rlm = rlmkit.RLM("context, question -> answer", lm=model_with_preset(seen), blocks_per_turn=2)
    pred = rlm(context="x", question="q")
    assert "PRESET-INSTRUCTIONS" in seen[0]["system"]
    assert pred.trajectory.meta.limits["blocks_per_turn"] == 2 and BLOCK_END not in seen[0]["stop"]


@pytest.mark.skipif(not SHIPPED_PROGRAM.exists(), reason="this build ships no tuned program")
def test_the_shipped_program_is_well_formed_and_says_where_it_came_from():
    program = shipped_program()
    provenance = program["provenance"]
    assert provenance["command"].startswith("python benchmarks/tune_embedded.py")
    assert provenance["date"] and provenance["train"]
    assert all(
        int(entry.split(" seed ")[1].split()[0]) < 1000 for entry in provenance["train"]
    )  # not held out
    json.dumps(program)
    for knob in program.get("knobs", {}):
        assert knob in rlmkit.settings.KNOBS

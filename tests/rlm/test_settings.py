"""Every RLM knob lives in RunSettings: set by name, checked once, carried to children and through
save/load without being listed anywhere else."""

from __future__ import annotations

import dataclasses

import pytest

import rlmkit
from rlmkit.errors import UserError
from rlmkit.models.lm import FunctionLM
from rlmkit.prompting import Display
from rlmkit.sandbox.base import SandboxLimits
from rlmkit.settings import KNOBS, RunSettings

LM = FunctionLM(lambda messages: "unused")  # no call is made
CHANGED = {
    "max_iterations": 7,
    "max_llm_calls": 11,
    "max_depth": 3,
    "cell_timeout": 12.5,
    "max_concurrency": 5,
    "max_tokens": 300,
    "sub_max_tokens": 200,
    "blocks_per_turn": 1,
    "hold_unread_answers": True,
    "sandbox": "inline",
    "protocol": "final",
    "budget": rlmkit.Budget(max_calls=9),
    "limits": SandboxLimits(memory_bytes=1 << 30),
    "display": Display(max_output_chars=1_234),
}


def comparable(settings: RunSettings) -> dict:
    return settings.to_state()


def test_the_table_of_changed_knobs_covers_every_knob():
    assert set(CHANGED) == set(KNOBS)  # a new knob: add a changed value above


def test_every_knob_survives_save_load_and_reaches_children():
    rlm = rlmkit.RLM("context -> answer", lm=LM, **CHANGED)
    rlm.protocol.finish_prompt = "Finish with FINAL({fields})."
    loaded = rlmkit.RLM("context -> answer", lm=LM)
    loaded.load_state(rlm.dump_state())
    assert comparable(loaded.settings) == comparable(rlm.settings)
    child = rlm.run_spec().child()
    assert comparable(child.settings) == comparable(rlm.settings)
    assert child.settings.protocol is not rlm.protocol  # a child may rewrite its own protocol's text
    grandchild = child.child()
    assert comparable(grandchild.settings) == comparable(rlm.settings) and grandchild.depth == 2


def test_knobs_are_read_and_set_by_name_and_checked_like_the_constructor():
    rlm = rlmkit.RLM("context -> answer", lm=LM)
    rlm.max_iterations = 4
    assert rlm.max_iterations == 4 == rlm.settings.max_iterations
    with pytest.raises(UserError, match="max_iterations must be an integer >= 1"):
        rlm.max_iterations = 0
    assert rlm.sandbox_name == "process" and dataclasses.is_dataclass(rlm.settings)


def test_numeric_knobs_are_what_a_run_records():
    assert set(RunSettings().record()) == {
        "max_iterations",
        "max_llm_calls",
        "max_depth",
        "cell_timeout",
        "max_concurrency",
        "max_tokens",
        "sub_max_tokens",
        "blocks_per_turn",
    }

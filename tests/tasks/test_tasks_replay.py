"""programs.tasks.replay: a compiled row's task comes back byte for byte, or a clear TaskError."""

from __future__ import annotations

import json

import pytest

from optimizers.compile.schema import ChatMessage, RewardSpec, RLRow
from programs.tasks import generate
from programs.tasks.base import TaskError
from programs.tasks.replay import example_of, inputs_of


def row_for(example, **example_fields) -> RLRow:
    fields = {
        "suite": example.suite,
        "example_id": example.id,
        "seed": example.seed,
        "length": example.length,
    }
    return RLRow(
        id="r",
        task_id=example.id,
        prompt=[ChatMessage(role="user", content="q")],
        answer=json.dumps(example.gold),
        example={**fields, **example_fields},
        reward=RewardSpec(scorer="programs.tasks:score", suite=example.suite, knobs=example.knobs),
    )


def test_the_row_names_its_example_and_gets_it_back():
    wanted = generate("aggregation", n=3, length=3_000, seed=4, labelled=True)[2]
    row = row_for(wanted)
    assert example_of(row) == wanted
    assert inputs_of(row)["context"] == wanted.inputs["context"]


def test_a_row_that_names_no_task_or_another_gold_is_refused():
    wanted = generate("needle", n=1, length=2_000, seed=1)[0]
    with pytest.raises(TaskError, match="missing \\['example_id'\\]"):
        example_of(row_for(wanted, example_id=None))
    with pytest.raises(TaskError, match="gold differs"):
        example_of(row_for(wanted).model_copy(update={"answer": json.dumps(["other"])}))

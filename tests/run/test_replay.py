"""rlmkit.run.replay: a recorded run's first turns played back, checked prompt by prompt, and
everything else handed to the wrapped model under the right rollout id."""

from __future__ import annotations

import asyncio

import pytest

from rlmkit.errors import PrefixNotReproduced
from rlmkit.models.contract import Completion, ModelTraits
from rlmkit.models.lm_cache import current_rollout_id
from rlmkit.run.replay import Branch, ReplayedPrefix
from rlmkit.testing.synthetic_runs import make_run
from rlmkit.trajectory import Usage


class Inner:
    """A model that answers "fresh" and keeps what it was asked, under which rollout id."""

    model, traits = "inner", ModelTraits()

    def __init__(self) -> None:
        self.asked: list[tuple[list[dict], int | None, int | None]] = []

    async def acomplete(self, messages: list[dict], **options) -> Completion:
        self.asked.append((messages, options.get("rollout_id"), current_rollout_id.get()))
        return Completion("fresh", self.model, Usage(calls=1), False, 0.0)

    def describe(self) -> dict:
        return {"model": self.model}


def asked(model: ReplayedPrefix, messages, rollout_id):
    return asyncio.run(model.acomplete([m.model_dump() for m in messages], rollout_id=rollout_id))


def test_turns_before_the_branch_are_played_and_the_branch_turn_is_the_models():
    run = make_run(n_turns=3)
    inner = Inner()
    model = ReplayedPrefix(inner, [(1000, Branch(run, 2, None))])

    for turn in (0, 1):
        played = asked(model, run.turn_messages(turn), 1000)
        assert played.text == run.turns[turn].reply and played.cached and played.usage.cached_calls == 1
    assert inner.asked == []
    assert asked(model, run.turn_messages(2), 1000).text == "fresh"
    assert inner.asked[-1][1] == 1000  # the continuation's own rollout id: a fresh sample
    later = [*[m.model_dump() for m in run.turn_messages(2)], {"role": "assistant", "content": "x"}]
    asyncio.run(model.acomplete([*later, {"role": "user", "content": "out"}], rollout_id=1000))
    assert len(inner.asked) == 2  # past the branch turn, the model speaks on


def test_a_sub_call_goes_out_under_the_recorded_runs_rollout_id_and_others_pass_through():
    run, inner = make_run(n_turns=2), Inner()
    model = ReplayedPrefix(inner, [(1000, Branch(run, 1, None)), (1101, Branch(run, 1, 1))])
    sub = [{"role": "user", "content": "summarise this"}]
    asyncio.run(model.acomplete(sub, rollout_id=1000))
    asyncio.run(model.acomplete(sub, rollout_id=1101))
    asyncio.run(model.acomplete(sub, rollout_id=7))  # no branch of that id: as it is
    assert [(rollout, context) for _, rollout, context in inner.asked] == [(None, None), (1, 1), (7, None)]


def test_a_prompt_the_recorded_run_never_saw_ends_the_continuation():
    run = make_run(n_turns=3)
    model = ReplayedPrefix(Inner(), [(1000, Branch(run, 2, None))])
    changed = [m.model_dump() for m in run.turn_messages(1)]
    changed[-1]["content"] += " (printed otherwise)"
    with pytest.raises(PrefixNotReproduced, match="prompt of turn 1 is not the recorded one"):
        asyncio.run(model.acomplete(changed, rollout_id=1000))


@pytest.mark.parametrize("turn", [0, 3])
def test_a_branch_starts_after_a_played_turn_and_at_a_recorded_one(turn):
    with pytest.raises(ValueError, match="continuation starts"):
        Branch(make_run(n_turns=3), turn, None)

"""Model faults: runs complete at a 20% fault rate; exhausted retries end typed, trajectory kept."""

from __future__ import annotations

import pytest

import rlmkit
from rlmkit.errors import LMError
from rlmkit.testing import Faults
from tests.helpers.script import Script

ROOT = [
    "```repl\nparts = [context[i:i+50] for i in range(0, len(context), 50)]\nprint(len(parts))\n```",
    "```repl\nanswers = llm_query_batched([f'count x in: {p}' for p in parts])\nprint(answers[:2])\n```",
    "```repl\nSUBMIT(answer=str(sum(p.count('x') for p in parts)))\n```",
]


TRANSPORTS = ["openai", "litellm"]  # the direct path and litellm must absorb the same faults


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_runs_complete_at_twenty_percent_faults(serve, seed, transport):
    faults = Faults(
        rate=0.2,
        kinds=("429", "500", "timeout", "truncated_json", "empty", "no_code", "broken_code"),
        seed=seed,
        timeout_s=1.5,
        retry_after=0.01,
    )
    # every root turn is replayed from the turn count, so a fault just costs one more turn
    server, lm = serve(
        Script(lambda body: ROOT[min(_code_turns(body), len(ROOT) - 1)], sub=lambda p: "1"),
        faults=faults,
        lm_kwargs={"num_retries": 6, "timeout": 1.0, "transport": transport},
    )
    rlm = rlmkit.RLM("context -> answer", lm=lm, max_iterations=12)
    pred = rlm(context="x.." * 200)
    assert pred.answer == "200"
    assert sum(faults.injected.values()) > 0  # faults really happened and were absorbed
    told = [t.feedback for t in pred.trajectory.turns if t.feedback and "no ```repl" in t.feedback]
    expected = faults.injected.get("empty", 0) + faults.injected.get("no_code", 0)
    assert len(told) <= expected


def _code_turns(body: dict) -> int:
    """Turns whose reply was one of ours (fault replies do not advance the script)."""
    return sum(
        1 for m in body["messages"] if m["role"] == "assistant" and any(m["content"] == r for r in ROOT)
    )


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_exhausted_retries_raise_typed_error_and_keep_the_trajectory(serve, transport):
    calls = {"n": 0}

    def responder(body):
        calls["n"] += 1
        return "```repl\nprint('turn')\n```"

    server, lm = serve(responder, lm_kwargs={"num_retries": 1, "transport": transport})
    rlm = rlmkit.RLM("context -> answer", lm=lm, max_iterations=5)
    # the first two root turns succeed, then every request fails
    original = server.reply

    def flaky(body):
        if calls["n"] >= 2:
            return 500, {}, b'{"error": {"message": "down"}}'
        return original(body)

    server.reply = flaky
    with pytest.raises(LMError) as info:
        rlm(context="abc")
    traj = info.value.trajectory
    assert traj is not None and traj.status == "error" and traj.n_turns == 2

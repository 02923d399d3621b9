"""Continue recorded runs from a chosen turn: the root replies before it are played back from the
record, word for word, and the wrapped model speaks from that turn on.

Why: a run that failed at its last turn holds a prefix (every turn before it) that a right ending
may follow. Sampling only that turn again, K times, gives endings that differ after one shared
prefix: the preference pairs DPO wants (a right ending against the recorded wrong one) and
continuations a per-turn filter can keep. The REPL comes back by running the recorded code again
(a played reply is the recorded one, so the sandbox runs what ran before), and every prompt is
compared with the recorded one before its reply is played: a prefix that does not come back
(code that printed something else, a sub-call answered otherwise) ends that run with
``PrefixNotReproduced`` rather than train on a prompt no run ever saw.

Runs are told apart by their rollout id and their task: each continuation runs under a rollout
id of its own. Its sub-calls go out under the recorded run's rollout id, so the replies an LM
cache kept for the recorded run answer the same sub-calls again.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rlmkit.errors import PrefixNotReproduced
from rlmkit.models.contract import Completion, Model
from rlmkit.models.lm_cache import rollout
from rlmkit.prompting import REPLY_CUT
from rlmkit.trajectory import ChatMessage, Message, Trajectory, Turn, Usage


@dataclass(frozen=True)
class Branch:
    """Where one continuation starts: ``run``'s root turns before ``turn`` are played back;
    ``recorded_rollout`` is the rollout id ``run`` was sampled under."""

    run: Trajectory
    turn: int
    recorded_rollout: int | None

    def __post_init__(self) -> None:
        if not 1 <= self.turn < self.run.n_turns:
            raise ValueError(
                f"a continuation starts after at least one played turn and at a recorded one: "
                f"turn {self.turn} of a run with {self.run.n_turns}"
            )


class ReplayedPrefix:
    """A model (the ``Model`` contract) that plays ``branches`` back around ``inner``.

    ``branches`` pairs a continuation's rollout id with where it starts. Continuations of runs
    of different tasks may share a rollout id: a root call is matched to its branch by its system
    prompt and task message, and a sub-call goes out under the recorded rollout id, which such
    continuations share (they continue one sample of each task). Calls under a rollout id no
    branch has go to ``inner`` as they are."""

    def __init__(self, inner: Model, branches: Iterable[tuple[int, Branch]]):
        self.inner = inner
        self.model, self.traits = inner.model, inner.traits
        # per rollout id: each branch with its recorded prompts, turn 0 .. its first own turn
        self._branches: dict[int, list[tuple[Branch, list[list[tuple[str, str]]]]]] = {}
        for own, branch in branches:
            prompts = [_pairs(branch.run.turn_messages(i)) for i in range(branch.turn + 1)]
            self._branches.setdefault(own, []).append((branch, prompts))
        self._speaking: set[tuple[int, str]] = set()  # (rollout id, run id) past their played prefix

    def describe(self) -> dict[str, object]:
        return self.inner.describe() | {"replays": sum(len(b) for b in self._branches.values())}

    def __getattr__(self, name: str) -> Any:  # the inner model's own extras (cache_dir, close, ...)
        return getattr(self.inner, name)

    async def acomplete(self, messages: list[ChatMessage], **options: object) -> Completion:
        own = options.get("rollout_id")  # this continuation's
        candidates = self._branches.get(own, []) if isinstance(own, int) else []
        if not isinstance(own, int) or not candidates:
            return await self.inner.acomplete(messages, **options)
        sent = _pairs(messages)
        found = [(branch, prompts) for branch, prompts in candidates if sent[:2] == prompts[0][:2]]
        if not found:  # not a root's first messages (system prompt and task): a sub-call
            recorded = candidates[0][0].recorded_rollout
            with rollout(recorded):  # None too: a model reads an unset rollout id from the context
                return await self.inner.acomplete(messages, **{**options, "rollout_id": recorded})
        (branch, prompts), key = found[0], (own, found[0][0].run.meta.run_id)
        for index, prompt in enumerate(prompts):
            if sent == prompt:
                if index == branch.turn:
                    self._speaking.add(key)
                    return await self.inner.acomplete(messages, **options)
                if index == 0:  # a run starting (again, when an evaluation resumes): play it back
                    self._speaking.discard(key)
                return _played(branch.run.turns[index], self.model)
        if key in self._speaking:
            return await self.inner.acomplete(messages, **options)
        turn = sum(1 for role, _ in sent if role == "assistant")
        raise PrefixNotReproduced(
            f"run {branch.run.meta.run_id}: the prompt of turn {turn} is not the recorded one "
            f"(continuing from turn {branch.turn}); the code before it printed something else"
        )


def _pairs(messages: list[ChatMessage] | list[Message]) -> list[tuple[str, str]]:
    return [(m.role, m.content) if isinstance(m, Message) else (m["role"], m["content"]) for m in messages]


def _played(turn: Turn, model: str) -> Completion:
    """The recorded reply as a completion: free, cached, cut where the recorded one was (the run
    then tells the model so again, as it did when it ran)."""
    cut = REPLY_CUT in (turn.feedback or "")
    return Completion(
        turn.reply,
        turn.model or model,
        Usage(calls=1, cached_calls=1),
        cached=True,
        duration_s=0.0,
        finish_reason="length" if cut else None,
    )


__all__ = ["Branch", "ReplayedPrefix"]

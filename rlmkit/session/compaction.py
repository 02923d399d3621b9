"""Compaction: a session call's task message kept within a share of the root model's window.

A session's task message grows with its calls: the earlier questions and answers it shows, and the
variables earlier calls left in the REPL. When the next one would pass ``compact_at`` of the root
model's window (``rlmkit.model_choice.window_tokens_of``: the model's traits, the embedded model's
server context, or litellm's map), the session shortens what the message *says*, never what the REPL
*holds*, in a fixed order until it fits:

1. summarise: the oldest calls are shown as one short line each (question and answer heads);
2. leave out: the oldest summarised calls are only counted;
3. unlist: the oldest variables are left to ``SHOW_VARS()`` (they stay in the REPL).

The rule is deterministic rather than a summary written by the session's own model: it costs no
model call and no budget, it cannot invent or drop a fact it was not told to, and a replayed session
compacts exactly as it did. What a summary would carry is already in the REPL, where the model's
code put what it needed; the message only has to say where to look. What was compacted is recorded
in the call's trajectory as a typed ``rlmkit.trajectory.Compaction``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rlmkit.errors import UserError
from rlmkit.prompting import session_notes, task_message
from rlmkit.run.inputs import RunInputs
from rlmkit.settings import RunSettings
from rlmkit.trajectory import Compaction

if TYPE_CHECKING:
    import dspy

CHARS_PER_TOKEN = 4  # a rough, provider-neutral rule: the window is in tokens, the message in text
# The task message only opens a call: the system prompt, and every turn's code and output, share the
# same window after it. A quarter leaves the rest of a 16K-token window for a dozen turns.
DEFAULT_COMPACT_AT = 0.25


@dataclass(frozen=True)
class Cuts:
    """How much of the notes one rendering shortens, oldest first."""

    summarised: int = 0  # calls shown as one short line
    left_out: int = 0  # calls before those, only counted
    unlisted: int = 0  # variables left to SHOW_VARS()


@dataclass(frozen=True)
class Draft:
    """One session call's notes before compaction (``prompting.session_notes``' parts), and what
    the run builds the task message from around them (``prompting.task_message``'s)."""

    variables: dict[str, str]  # live variables earlier calls made: name -> "type, size"
    history: list[tuple[dict[str, object], dict[str, object]]]  # earlier calls shown: (asked, answered)
    numbers: list[int]  # the session call each history entry comes from
    restored: str | None
    lost: dict[str, str]
    value_chars: int  # each shown value cut to this
    inputs: RunInputs
    asked: tuple[str, ...]
    signature: type[dspy.Signature]
    settings: RunSettings  # the run's, a preset's knobs applied

    def notes(self, cuts: Cuts) -> str:
        return session_notes(
            variables=self.variables,
            history=self.history,
            restored=self.restored,
            lost=self.lost,
            limit=self.value_chars,
            summarised=cuts.summarised,
            forgotten=cuts.left_out,
            unlisted=cuts.unlisted,
        )

    def message(self, cuts: Cuts) -> str:
        """The task message the run builds around ``notes(cuts)`` (``run.loop``), to measure."""
        return task_message(
            inputs=self.inputs.variables,
            aliases=self.inputs.aliases,
            signature=self.signature,
            display=self.settings.display,
            max_iterations=self.settings.max_iterations,
            earlier=self.notes(cuts),
            current=self.asked,
        )


def check_share(compact_at: float) -> float:
    if not isinstance(compact_at, (int, float)) or not 0 < compact_at <= 1:
        raise UserError(f"compact_at must be a share of the window in (0, 1], got {compact_at!r}")
    return float(compact_at)


def _cuts(calls: int, variables: int, summarised: int = 0) -> Iterator[Cuts]:
    """Every shortened rendering to try, from the least cut to the most, in the module's order;
    ``summarised``: the oldest calls summarised in every one of them."""
    for shown in range(max(1, summarised), calls + 1):
        yield Cuts(summarised=shown)
    for left_out in range(1, calls + 1):
        yield Cuts(summarised=calls - left_out, left_out=left_out)
    for unlisted in range(1, variables + 1):
        yield Cuts(left_out=calls, unlisted=unlisted)


def compact(
    draft: Draft, window_tokens: int | None, compact_at: float, summarised: int = 0
) -> tuple[str, Compaction | None]:
    """The call's notes, cut in the module's order until its task message fits ``compact_at`` of
    ``window_tokens`` (the most cut when nothing fits), and the record of what was cut (None when
    nothing was, or the window is unknown: then the history bounds alone keep the message short).
    ``summarised``: the oldest calls shown summarised whatever the window (``Session.compact``)."""
    floor = Cuts(summarised=min(summarised, len(draft.history)))
    if window_tokens is None:
        return draft.notes(floor), None
    limit = int(window_tokens * compact_at * CHARS_PER_TOKEN)
    full = len(draft.message(Cuts()))
    sent, chosen = len(draft.message(floor)), floor
    if sent > limit:
        for cuts in _cuts(len(draft.history), len(draft.variables), floor.summarised):
            sent, chosen = len(draft.message(cuts)), cuts
            if sent <= limit:
                break
    if chosen == Cuts():
        return draft.notes(chosen), None
    shortened = draft.numbers[: chosen.left_out + chosen.summarised]
    record = Compaction(
        window_tokens=window_tokens,
        limit_chars=limit,
        full_chars=full,
        task_chars=sent,
        left_out_calls=shortened[: chosen.left_out],
        summarised_calls=shortened[chosen.left_out :],
        unlisted_variables=list(draft.variables)[: chosen.unlisted],
    )
    return draft.notes(chosen), record


__all__ = ["CHARS_PER_TOKEN", "DEFAULT_COMPACT_AT", "Cuts", "Draft", "check_share", "compact"]

"""The text a served call shows of a run while it works, and of a finished run's turns: each
root turn's reply (its code), what the cell printed, and each sub-call's answer. What a child RLM
does is inside its sub-call. The OpenAI routes send it as reasoning (``reasoning_content``
deltas, reasoning items), MCP as progress.
"""

from __future__ import annotations

from typing import Any

from rlmkit import events as ev
from rlmkit.trajectory import Turn

SHOWN_CHARS = 2_000  # of a cell's output or a sub-call's answer, per delta: a stream is for watching


def _bounded(text: str) -> str:
    if len(text) <= SHOWN_CHARS:
        return text
    half = SHOWN_CHARS // 2
    return f"{text[:half]}\n... ({len(text) - SHOWN_CHARS:,} characters not shown) ...\n{text[-half:]}"


def _turn(index: int, reply: str) -> str:
    return f"[turn {index + 1}]\n{reply.strip()}\n"


def _cell(block: Any) -> str | None:
    shown = "".join(part for part in (block.stdout, block.stderr, block.error or "") if part).strip()
    state = " (timed out)" if block.timed_out else ""
    return f"[output{state}]\n{_bounded(shown)}\n" if shown or state else None


def _subcall(node: Any) -> str:
    answer = f"error: {node.error}" if node.error else node.reply
    return f"[{node.name}] {_bounded(answer.strip())}\n"


def reasoning_of(event: ev.Event) -> str | None:
    """What a streamed response shows for one event of the run (None: nothing)."""
    if event.depth:  # a child run: its work is summed up by its sub-call's answer
        return None
    if isinstance(event, ev.ModelReply):  # a root turn's reply; a sub-call's is shown as it finishes
        owner, completion = event.owner, event.completion
        return _turn(owner.index, completion.text) if type(owner) is Turn and completion else None
    if isinstance(event, ev.CellFinished):
        return _cell(event.block)
    if isinstance(event, ev.SubcallFinished):
        return _subcall(event.node)
    return None


def reasoning_turns(trajectory: Any) -> list[str]:
    """The same text, read from a finished run's trajectory (a whole response needs no events):
    one string per root turn."""
    turns: list[str] = []
    for turn in trajectory.turns:
        parts = [_turn(turn.index, turn.reply)]
        for block in turn.blocks:
            parts.extend(_subcall(node) for node in block.subcalls)
            if (cell := _cell(block)) is not None:
                parts.append(cell)
        turns.append("".join(parts))
    return turns


def starts_turn(event: ev.Event) -> bool:
    """Whether the event's text (``reasoning_of``) begins a root turn, not adds to the last."""
    return type(event) is ev.ModelReply


def add_reasoning(turns: list[str], event: ev.Event) -> str | None:
    """Add what ``event`` shows to ``turns`` (one string per root turn); the text, if any."""
    text = reasoning_of(event)
    if text is not None:
        if starts_turn(event) or not turns:
            turns.append(text)
        else:
            turns[-1] += text
    return text

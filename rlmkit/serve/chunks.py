"""The shapes a chat completion is written in, built from the openai SDK's own types, and the
text a streamed response shows of a run while it works. Each is validated by the SDK's type
from a plain dict (pydantic-core: a few microseconds); the SDK's own ``construct`` walks the
type in Python and costs twenty times that, on every chunk.

A run's turns go out as ``reasoning_content`` deltas (the field reasoning models stream their
thinking in): each root turn's reply (its code), what the cell printed, and each sub-call's
answer. The answer goes out as ``content``. What a child RLM does is inside its sub-call.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from openai.types.chat import ChatCompletion, ChatCompletionChunk

from rlmkit import events as ev
from rlmkit.trajectory import Usage

SHOWN_CHARS = 2_000  # of a cell's output or a sub-call's answer, per delta: a stream is for watching


def completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex}"


def usage_of(usage: Usage) -> dict[str, Any]:
    """The whole call tree's usage; ``cost`` (dollars, where the model has a price) rides along
    as an extra field, as OpenRouter and litellm's proxy send it."""
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
        "cost": usage.cost,
        "rlm_calls": usage.calls,
    }


def completion(
    cid: str, model: str, content: str, reasoning: str, usage: Usage, created: int | None = None
) -> ChatCompletion:
    message = {"role": "assistant", "content": content, "reasoning_content": reasoning}
    return ChatCompletion.model_validate(
        {
            "id": cid,
            "object": "chat.completion",
            "created": created or int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": usage_of(usage),
        }
    )


def chunk(
    cid: str,
    model: str,
    created: int,
    *,
    finish: str | None = None,
    usage: Usage | None = None,
    empty: bool = False,
    **delta: Any,
) -> ChatCompletionChunk:
    """One chunk: a delta (``role``, ``content``, ``reasoning_content``), or with ``empty`` the
    closing usage chunk, whose ``choices`` is empty as OpenAI sends it."""
    body: dict[str, Any] = {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [] if empty else [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage is not None:  # unset, not null, on every other chunk
        body["usage"] = usage_of(usage)
    return ChatCompletionChunk.model_validate(body)


def dump(model: Any) -> str:
    """JSON as OpenAI writes it: fields that were set (a null ``finish_reason`` included)."""
    return model.model_dump_json(exclude_unset=True)


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
    kind = type(event)
    if kind is ev.ModelReply and event.completion is not None and event.start.root:
        return _turn(event.owner.index, event.completion.text)
    if kind is ev.CellFinished:
        return _cell(event.block)
    if kind is ev.SubcallFinished:
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

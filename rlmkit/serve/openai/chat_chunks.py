"""The shapes a chat completion is written in, built from the openai SDK's own types, and the
text a streamed response shows of a run while it works. Each is validated by the SDK's type
from a plain dict (pydantic-core: a few microseconds); the SDK's own ``construct`` walks the
type in Python and costs twenty times that, on every chunk.

A run's turns (``rlmkit.serve.reasoning``) go out as ``reasoning_content`` deltas (the field
reasoning models stream their thinking in); the answer goes out as ``content``.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from openai.types.chat import ChatCompletion, ChatCompletionChunk

from rlmkit.trajectory import Usage


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
    cid: str,
    model: str,
    content: str | None,
    reasoning: str,
    usage: Usage,
    created: int | None = None,
    metadata: dict[str, str] | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
) -> ChatCompletion:
    """A whole completion: the answer, or (``tool_calls``) the client's tool calls the run waits
    on; ``metadata``: what the server says of the call beside the answer (an extra field, as
    ``cost`` in the usage is)."""
    # refusal and logprobs are null, never absent: the schema requires both (an RLM refuses
    # nothing by a separate channel, and its answer is not one model's tokens)
    message: dict[str, Any] = {
        "role": "assistant",
        "content": content,
        "refusal": None,
        "annotations": [],
        "reasoning_content": reasoning,
    }
    if tool_calls:
        message["tool_calls"] = tool_calls
    finish = "tool_calls" if tool_calls else "stop"
    return ChatCompletion.model_validate(
        {
            "id": cid,
            "object": "chat.completion",
            "created": created or int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": usage_of(usage),
            **({"metadata": metadata} if metadata else {}),
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
    text: str = model.model_dump_json(exclude_unset=True)
    return text

"""rlmkit's canonical training-data rows (one JSONL line each), shared by compilers and backends.

Every kind is a pydantic model, so a row is validated once when written and again when a
backend reads it. Messages are plain ``{"role", "content"}`` dicts as chat templates expect;
``tools`` and tool-call arguments are JSON *strings* (what TRL and the OpenAI format want).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

Role = Literal["system", "user", "assistant", "tool"]
DatasetKind = Literal["sft", "rl", "rl_group", "dpo"]


class ChatMessage(BaseModel):
    role: Role
    content: str
    tool_calls: list[dict[str, Any]] | None = None

    @field_validator("tool_calls")
    @classmethod
    def _arguments_are_json(cls, calls: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
        for call in calls or []:
            arguments = call.get("function", {}).get("arguments")
            if not isinstance(arguments, str):
                raise ValueError("tool call arguments must be a JSON string")  # noqa: TRY004 - pydantic wants ValueError
            json.loads(arguments)  # raises ValueError on invalid JSON
        return calls


class _Row(BaseModel):
    id: str
    task_id: str  # the split never puts one task_id in both train and validation
    run_id: str | None = None
    meta: dict[str, Any] = Field(default_factory=dict)


class SFTRow(_Row):
    """One sample: ``prompt`` (messages the model saw) + ``completion`` (the assistant target).

    ``messages`` = prompt + completion, for trainers that take conversations.
    """

    kind: Literal["sft"] = "sft"
    turn: int | None = None  # root turn index, None for whole conversations
    prompt: list[ChatMessage]
    completion: list[ChatMessage]
    messages: list[ChatMessage]
    tools: str | None = None  # JSON string
    score: float | None = None

    @model_validator(mode="after")
    def _has_assistant_target(self) -> SFTRow:
        if not self.completion or any(m.role != "assistant" for m in self.completion):
            raise ValueError("completion must be non-empty assistant messages")
        if self.messages != self.prompt + self.completion:
            raise ValueError("messages must equal prompt + completion")
        return self


class RewardSpec(BaseModel):
    scorer: str  # "module:function" taking (example, prediction) -> float
    suite: str | None = None
    knobs: dict[str, Any] = Field(default_factory=dict)


class RLRow(_Row):
    """A prompt with a verifiable answer; the reward is computed by ``reward.scorer``."""

    kind: Literal["rl"] = "rl"
    prompt: list[ChatMessage]
    answer: str  # JSON-encoded gold answer
    example: dict[str, Any] = Field(default_factory=dict)  # what the scorer needs (no huge context)
    reward: RewardSpec


class RLGroupRow(_Row):
    """One rollout of an offline GRPO group: reward and group-normalised advantage."""

    kind: Literal["rl_group"] = "rl_group"
    group_id: str
    prompt: list[ChatMessage]
    completion: list[ChatMessage]
    reward: float
    advantage: float


class DPORow(_Row):
    kind: Literal["dpo"] = "dpo"
    turn: int | None = None
    prompt: list[ChatMessage]
    chosen: list[ChatMessage]
    rejected: list[ChatMessage]
    score_chosen: float
    score_rejected: float


ROW_MODELS: dict[str, type[_Row]] = {"sft": SFTRow, "rl": RLRow, "rl_group": RLGroupRow, "dpo": DPORow}

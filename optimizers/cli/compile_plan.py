"""What one ``rlmkit compile`` is asked to do, as one frozen record checked when it is made.

Unset filters (None) take each kind's defaults: SFT keeps good runs, RL and DPO every scored one."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from rlmkit.errors import UserError


class Kind(StrEnum):
    sft = "sft"
    rl = "rl"
    dpo = "dpo"


class CompilePlan(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Kind
    runs: tuple[Path, ...] = Field(min_length=1, description="trajectory files or folders")
    out: Path
    # filters (None: the kind's default)
    min_score: float | None = None
    keep_zero_score: bool | None = None
    min_turns: int | None = Field(None, ge=0)
    max_chars: int | None = Field(None, ge=0)
    dedupe: bool | None = None
    per_task_cap: int | None = Field(None, ge=1)
    max_answer_ratio: float | None = Field(None, ge=0)
    status: tuple[str, ...] | None = None
    per_turn: bool | None = None
    metric: str | None = None
    # rendering
    mode: str = Field("turn", pattern="^(turn|conversation)$")
    subcalls: bool = False
    protocol: str | None = None
    repair: bool = True
    system_prompt_file: Path | None = None
    tokenizer: Path | None = None
    # per kind
    scorer: str | None = None
    min_group_size: int = Field(2, ge=1)
    drop_zero_advantage: bool = False
    min_margin: float = Field(0.0, ge=0)
    # the split and the signatures
    seed: int = 0
    val_fraction: float = Field(0.1, ge=0, lt=1)
    group_signatures: bool = False
    mixed_signatures: bool = False

    @model_validator(mode="after")
    def _one_way_with_signatures(self) -> CompilePlan:
        if self.group_signatures and self.mixed_signatures:
            raise ValueError("--group-signatures and --mixed-signatures exclude each other")
        return self


def plan(**flags: Any) -> CompilePlan:
    """The plan the flags give, or their first fault as a ``UserError`` (one line)."""
    flags["runs"] = tuple(flags.get("runs") or ())
    if flags.get("status") is not None:
        flags["status"] = tuple(flags["status"])
    try:
        return CompilePlan(**flags)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        message = error["msg"].removeprefix("Value error, ")
        raise UserError(f"--{where.replace('_', '-')}: {message}" if where else message) from None

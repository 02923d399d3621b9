"""What one ``rlmkit eval`` is asked to do, as one frozen record checked when it is made.

The command line's flags become an ``EvalPlan``; everything about them that can be wrong on its
own (a count below 1, flags that exclude each other, the embedded model's flags on another
model) is refused here, before any example is generated or any model starts. ``plan(**flags)``
gives the first fault as a one-line ``UserError``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from rlmkit.cli.common import EMBEDDED_FLAGS
from rlmkit.errors import UserError


class EvalPlan(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    # the examples
    suite: str
    n: int = Field(10, ge=1, description="examples")
    length: int = Field(100_000, ge=1, description="context characters per example")
    seed: int = Field(0, ge=0, description="generator seed")
    knob: tuple[str, ...] = Field((), description="suite knobs as name=value")
    hint: bool = Field(False, description="the gold in each question (training seeds only)")
    # the models
    lm: str = "local"
    api_base: str | None = None
    adapter: str | None = Field(None, description="the embedded model's LoRA adapter, 'none' or 'shipped'")
    local_threads: int | None = Field(None, ge=1, description="the embedded model's own server's threads")
    sub_lm: str | None = None
    temperature: float | None = Field(None, ge=0)
    lm_cache: str | None = Field(None, description="a directory, or 'off'")
    # the program and what bounds a run
    program: str = "rlm"
    moves: str = "count"
    hold_unread_answers: bool = False
    max_depth: int = Field(1, ge=0)
    max_iterations: int = Field(20, ge=1, description="root turns per run: the bound that ends it")
    max_tokens: int | None = Field(None, ge=1, description="tokens per run, sub-calls included: a bound")
    max_seconds: float | None = Field(
        None, ge=1.0, description="a fault guard on a run's wall time: hit twice, the run is cut"
    )
    # how the runs are made and kept
    workers: int = Field(4, ge=1)
    samples: int = Field(1, ge=1, description="distinct runs per example")
    out: str | None = None
    baseline: bool = False
    plain: bool = False
    window_tokens: int | None = Field(None, ge=1)
    retry_failed: bool = False
    branch_from: str | None = None
    branch_below: float = Field(1.0, ge=0.0)
    ray: str | None = None

    @model_validator(mode="after")
    def _flags_that_fit_together(self) -> EvalPlan:
        if (self.adapter is not None or self.local_threads) and self.lm not in EMBEDDED_FLAGS:
            raise ValueError("--adapter and --local-threads apply to the embedded model only (--lm local)")
        if self.branch_from and (self.baseline or self.plain):
            raise ValueError("--branch-from continues the program's runs: drop --baseline and --plain")
        return self


def plan(**flags: Any) -> EvalPlan:
    """The plan the flags give, or their first fault as a ``UserError`` (one line, no pydantic dump)."""
    flags["knob"] = tuple(flags.get("knob") or ())
    try:
        return EvalPlan(**flags)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        raise UserError(f"{'--' + where.replace('_', '-') + ': ' if where else ''}{error['msg']}".replace(
            "Value error, ", "")) from None  # fmt: skip

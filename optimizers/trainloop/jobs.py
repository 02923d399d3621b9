"""What the outer loop proposes and records: a ``ProposedJob`` inside a ``JobSpace``, and a ``JobRecord``.

A proposal is the part of a training job the job writer chooses (which task families and
lengths to train on, how to filter the compiled data, backend and hyperparameters). The
tuner turns it into a full ``TrainJob`` once the dataset is built.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from optimizers.backends.base import LoRA, TrainJob

# Backends that train an SFT job and return the trained model. The others (prime-rl, verifiers,
# openai-jsonl) only write files for another tool: their "artifact" is a config, not a model.
TRAINING_BACKENDS = ("trl-sft", "tinker")


class ProposedJob(BaseModel):
    """A training job as the job writer states it (an LM writes this as its typed output)."""

    model_config = ConfigDict(extra="forbid")

    families: list[str] = Field(description="task families whose runs become training data")
    length: int = Field(description="context length in characters of the generated training tasks")
    min_score: float = Field(
        0.5, ge=0.0, le=1.0, description="compile filter: keep runs scoring at least this"
    )
    backend: str = Field("trl-sft", description="training backend adapter")
    lr: float = Field(1e-4, gt=0, description="learning rate")
    steps: int = Field(20, ge=1, description="optimizer steps")
    batch_size: int = Field(2, ge=1)
    lora_rank: int = Field(8, ge=0, description="LoRA rank; 0 trains all weights")

    @model_validator(mode="after")
    def _some_family(self) -> ProposedJob:
        if not self.families:
            raise ValueError("families must name at least one task family")
        return self

    def to_train_job(
        self,
        *,
        dataset: Path,
        base_model: str,
        output_dir: Path,
        seed: int = 0,
        options: dict[str, Any] | None = None,
    ) -> TrainJob:
        """``options``: the backend options every job shares (e.g. ``gguf_file`` for a GGUF base)."""
        lora = LoRA(rank=self.lora_rank, alpha=2 * self.lora_rank) if self.lora_rank else None
        return TrainJob.build(
            kind="sft",
            dataset=dataset,
            base_model=base_model,
            output_dir=output_dir,
            lr=self.lr,
            steps=self.steps,
            batch_size=self.batch_size,
            lora=lora,
            seed=seed,
            max_seq_len=2048,
            max_completion_tokens=512,
            options=dict(options or {}),
        )


class JobSpace(BaseModel):
    """The declared search space. Held-out families are never offered to a job."""

    families: list[str]
    held_out: list[str] = Field(default_factory=list)
    lengths: list[int] = Field(default_factory=lambda: [2_000, 8_000])
    min_scores: list[float] = Field(default_factory=lambda: [0.0, 0.5, 1.0])
    backends: list[str] = Field(default_factory=lambda: ["trl-sft"])
    lr: tuple[float, float] = (1e-5, 1e-3)
    steps: list[int] = Field(default_factory=lambda: [2, 10, 50])
    lora_ranks: list[int] = Field(default_factory=lambda: [0, 8, 16])
    batch_sizes: list[int] = Field(default_factory=lambda: [1, 2, 4])

    @model_validator(mode="after")
    def _not_empty(self) -> JobSpace:
        if not self.trainable:
            raise ValueError(
                "the job space has no family left to train on once the held-out families are removed"
            )
        export_only = [b for b in self.backends if b not in TRAINING_BACKENDS]
        if export_only or not self.backends:
            raise ValueError(
                f"backends {export_only or '[]'} cannot be in the loop: it needs a backend that trains "
                f"({', '.join(TRAINING_BACKENDS)}), not one that writes files for another tool"
            )
        for name in ("lengths", "min_scores", "steps", "lora_ranks", "batch_sizes"):
            if not getattr(self, name):
                raise ValueError(f"{name} must offer at least one value")
        if not 0 < self.lr[0] <= self.lr[1]:
            raise ValueError(f"lr must be a range (low, high) with 0 < low <= high, got {self.lr}")
        return self

    @property
    def trainable(self) -> list[str]:
        return [f for f in self.families if f not in self.held_out]

    def check(self, job: ProposedJob) -> None:
        """Refuse a proposal outside the space (a proposer's mistake, fed back to it)."""
        problems = []
        bad = [f for f in job.families if f not in self.trainable]
        if bad:
            problems.append(f"families {bad} are not trainable (choose from {self.trainable})")
        if job.backend not in self.backends:
            problems.append(f"backend {job.backend!r} is not one of {self.backends}")
        if not self.lr[0] <= job.lr <= self.lr[1]:
            problems.append(f"lr {job.lr} is outside [{self.lr[0]}, {self.lr[1]}]")
        for field, allowed in (
            ("length", self.lengths),
            ("min_score", self.min_scores),
            ("steps", self.steps),
            ("lora_rank", self.lora_ranks),
            ("batch_size", self.batch_sizes),
        ):
            if getattr(job, field) not in allowed:
                problems.append(f"{field} {getattr(job, field)} is not one of {allowed}")
        if problems:
            raise ValueError("; ".join(problems))

    def describe(self) -> str:
        return self.model_dump_json(indent=1)


class JobRecord(BaseModel):
    """One finished (or failed) job of the loop: one line of ``jobs.jsonl``."""

    index: int
    proposer: str
    proposal: dict[str, Any] | None = None
    state: Literal["done", "failed", "rejected"]
    reason: str | None = None
    reward: float | None = None  # post - pre, mean over every evaluated family
    reward_seen: float | None = None
    reward_withheld: float | None = None
    pre: dict[str, float] = Field(default_factory=dict)
    post: dict[str, float] = Field(default_factory=dict)
    artifact: str | None = None
    cost: float = 0.0
    wall_s: float = 0.0
    trial: int | None = None  # optuna trial number, for the optuna proposer

"""trl-dpo: preference tuning with ``trl.DPOTrainer`` (LoRA through peft) on ``compile dpo`` pairs.

Each row is one root turn: the conversation before it (``prompt``), the reply of a run that
scored higher (``chosen``) and of one that scored lower on the same example (``rejected``).
With a LoRA the frozen base is DPO's reference model, so no second copy of the weights is
loaded. Trained after SFT, point ``base_model`` at the SFT run's merged model, or train DPO alone.

Several GPUs: ``accelerate launch -m rlmkit train --backend trl-dpo job.toml``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from optimizers.backends.base import TrainJob, TrainResult
from optimizers.backends.options import TRLOptions, option
from optimizers.backends.trl_common import TRLBackend, chat_messages, trainer_arguments
from rlmkit.errors import ConfigError


def dpo_records(rows: list[Any]) -> list[dict[str, Any]]:
    """Canonical DPO rows -> TRL's conversational preference records."""
    return [
        {
            "prompt": chat_messages(row.prompt),
            "chosen": chat_messages(row.chosen),
            "rejected": chat_messages(row.rejected),
        }
        for row in rows
    ]


@dataclass(frozen=True)
class TRLDPOOptions(TRLOptions):
    """trl-dpo's options: the model file, TRL config fields, and how far DPO may move."""

    beta: float = option(0.1, "DPO's beta: how far the policy may move from the reference model")

    def __post_init__(self) -> None:
        if self.beta <= 0:
            raise ConfigError(f"options.beta must be > 0, not {self.beta!r}")


class TRLDPOBackend(TRLBackend):
    name = "trl-dpo"
    row_kinds: ClassVar = {"dpo": ("dpo",)}
    options_type = TRLDPOOptions

    def records(self, job: TrainJob, rows: list[Any]) -> list[dict[str, Any]]:
        return dpo_records(rows)

    def train(self, job: TrainJob, prepared: TrainResult) -> TrainResult:
        from trl import DPOConfig, DPOTrainer

        options = self.options(job)
        config = DPOConfig(
            max_length=job.max_seq_len, beta=float(options.beta), **trainer_arguments(job, options)
        )
        return self.fit_splits(job, options, prepared, DPOTrainer, config)

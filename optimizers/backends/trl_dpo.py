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

from optimizers.backends.base import Backend, TrainJob, TrainResult, write_splits
from optimizers.backends.options import TRLOptions, option
from optimizers.backends.trl_common import (
    TRL_DEPS,
    chat_messages,
    finish,
    launch_command,
    load_model_and_tokenizer,
    lora_config,
    trainer_arguments,
    write_job_file,
)
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


class TRLDPOBackend(Backend):
    name = "trl-dpo"
    requires = TRL_DEPS
    row_kinds: ClassVar = {"dpo": ("dpo",)}
    needs_local_model = True
    options_type = TRLDPOOptions

    def prepare(self, job: TrainJob) -> TrainResult:
        validated = self.validate(job)
        folder = job.output_dir / "data"
        records = {split: dpo_records(rows) for split, rows in validated.splits.items()}
        files = [write_job_file(job), *write_splits(folder, records)]
        return self.exported(validated, folder, files, command=launch_command(self.name, job))

    def run(self, job: TrainJob, dry_run: bool = False) -> TrainResult:
        prepared = self.prepare(job)
        if dry_run:
            return prepared
        from datasets import load_dataset
        from trl import DPOConfig, DPOTrainer

        data = load_dataset(
            "json", data_files={f.stem: str(f) for f in prepared.files if f.suffix == ".jsonl"}
        )
        model, tokenizer = load_model_and_tokenizer(job)
        config = DPOConfig(
            max_length=job.max_seq_len,
            beta=float(self.options(job).beta),
            **trainer_arguments(job),
        )
        trainer = DPOTrainer(
            model=model,
            args=config,
            train_dataset=data["train"],
            eval_dataset=data.get("validation"),
            processing_class=tokenizer,
            peft_config=lora_config(job),
        )
        trainer.train()
        return finish(self.name, job, trainer)

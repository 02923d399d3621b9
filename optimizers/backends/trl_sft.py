"""trl-sft: supervised fine-tuning with ``trl.SFTTrainer`` (LoRA through peft).

Two data layouts, chosen by ``options.format``:
- ``prompt_completion`` (default): one sample per root turn, loss on the completion only.
  Per-turn samples also avoid a template mismatch: with assistant-only loss TRL renders
  Qwen3's ``<think>`` block into *every* assistant turn, which the policy never saw.
- ``messages``: whole conversations, loss on assistant turns only (``assistant_only_loss``);
  needs a chat template with ``{% generation %}`` markers (TRL swaps in its own for known models).

Several GPUs: ``accelerate launch -m rlmkit train --backend trl-sft job.toml``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from optimizers.backends.base import DatasetError, TrainJob, TrainResult
from optimizers.backends.options import TRLOptions, option
from optimizers.backends.trl_common import TRLBackend, chat_messages, trainer_arguments


@dataclass(frozen=True)
class TRLSFTOptions(TRLOptions):
    """trl-sft's options: the model file, TRL config fields, and the data layout."""

    format: Literal["prompt_completion", "messages"] = option(
        "prompt_completion", "per-turn prompt/completion samples, or whole conversations"
    )


def sft_records(rows: list[Any], layout: str) -> list[dict[str, Any]]:
    """Canonical SFT rows -> TRL's conversational records."""
    if layout == "messages":
        return [{"messages": chat_messages(row.messages)} for row in rows]
    return [
        {"prompt": chat_messages(row.prompt), "completion": chat_messages(row.completion)} for row in rows
    ]


class TRLSFTBackend(TRLBackend):
    name = "trl-sft"
    row_kinds: ClassVar = {"sft": ("sft",)}
    options_type = TRLSFTOptions

    def check(self, job: TrainJob, splits: dict[str, list[Any]]) -> None:
        for split, rows in splits.items():
            for row in rows:
                # Tool schemas and tool calls are not carried into TRL here (RLM code lives in ```repl
                # blocks); refusing beats silently training on half a conversation.
                if row.tools or any(m.tool_calls for m in row.messages):
                    raise DatasetError(f"{split} row {row.id} uses tools; trl-sft takes plain chat rows")

    def records(self, job: TrainJob, rows: list[Any]) -> list[dict[str, Any]]:
        return sft_records(rows, self.options(job).format)

    def train(self, job: TrainJob, prepared: TrainResult) -> TrainResult:
        from trl import SFTConfig, SFTTrainer

        options = self.options(job)
        layout = options.format
        config = SFTConfig(
            max_length=job.max_seq_len,
            completion_only_loss=layout == "prompt_completion",
            assistant_only_loss=layout == "messages",
            **trainer_arguments(job, options),
        )
        return self.fit_splits(job, options, prepared, SFTTrainer, config)

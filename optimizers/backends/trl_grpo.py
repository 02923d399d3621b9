"""trl-grpo: ``trl.GRPOTrainer`` on RL rows, with the RLM loop itself as the rollout.

Each prompt is played ``group_size`` times by a real ``rlmkit.RLM`` whose root is the policy
being trained (see ``rlm_rollout``): code runs in rlmkit's sandbox, sub-calls go to a frozen
sub-model, REPL output is masked out of the loss (``env_mask``), and the reward is the task's
scorer named in each row's ``RewardSpec`` (``"module:function"``, called with
``(example, prediction)``).

Options (``TRLGRPOOptions``): how a row becomes an RLM run (``inputs_fn`` / ``example_fn``:
compiled rows carry input *descriptions*, so a task suite regenerates the bodies; ``sub_lm`` +
``sub_api_base``: the frozen sub-model, by default the base model with the adapter off), the
model file, and ``trainer`` (extra GRPOConfig fields).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, ClassVar

from optimizers.backends.base import Backend, TrainJob, TrainResult, canonical, write_splits
from optimizers.backends.options import RolloutOptions, TRLOptions
from optimizers.backends.rlm_rollout import check_playable
from optimizers.backends.trl_common import (
    TRL_DEPS,
    finish,
    launch_command,
    load_model_and_tokenizer,
    lora_config,
    trainer_arguments,
    write_job_file,
)
from rlmkit.errors import ConfigError


@dataclass(frozen=True)
class TRLGRPOOptions(TRLOptions, RolloutOptions):
    """trl-grpo's options: the model file, TRL config fields, and how a row becomes an RLM run."""


class TRLGRPOBackend(Backend):
    name = "trl-grpo"
    requires = TRL_DEPS
    row_kinds: ClassVar = {"rl": ("rl",)}
    needs_local_model = True
    options_type = TRLGRPOOptions

    def check(self, job: TrainJob, splits: dict[str, list[Any]]) -> None:
        if job.batch_size % job.group_size:
            raise ConfigError(
                f"batch_size ({job.batch_size}) must be a multiple of group_size ({job.group_size}): "
                "each step trains whole groups"
            )
        if job.lora is None and not self.options(job).sub_lm:
            raise ConfigError("full fine-tuning has no frozen copy for sub-calls: set options.sub_lm")
        check_playable(job, [row for rows in splits.values() for row in rows])

    def prepare(self, job: TrainJob) -> TrainResult:
        validated = self.validate(job)
        folder = job.output_dir / "data"
        records = {split: [canonical(row) for row in rows] for split, rows in validated.splits.items()}
        files = [write_job_file(job), *write_splits(folder, records)]
        return self.exported(validated, folder, files, command=launch_command(self.name, job))

    def run(self, job: TrainJob, dry_run: bool = False) -> TrainResult:
        prepared = self.prepare(job)
        if dry_run:
            return prepared
        from datasets import Dataset
        from trl import GRPOConfig, GRPOTrainer

        from optimizers.backends.base import read_rows
        from optimizers.backends.rlm_rollout import RLMRollout, rlm_reward

        rows = read_rows(job.output_dir / "data" / "train.jsonl")
        dataset = Dataset.from_list(
            [{"prompt": [m.model_dump(exclude_none=True) for m in row.prompt]} for row in rows]
        )
        rollout = RLMRollout(job, rows)
        model, tokenizer = load_model_and_tokenizer(job)
        config = GRPOConfig(
            num_generations=job.group_size,
            max_completion_length=job.max_completion_tokens,
            **trainer_arguments(job),
        )
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=rlm_reward,
            args=config,
            train_dataset=dataset,
            processing_class=tokenizer,
            peft_config=lora_config(job),
            rollout_func=rollout,
        )
        trainer.train()
        result = finish(self.name, job, trainer)
        summary = rollout.summary()
        (job.output_dir / "rollouts.json").write_text(json.dumps(summary))
        return result.model_copy(update={"metrics": {**result.metrics, **summary}})

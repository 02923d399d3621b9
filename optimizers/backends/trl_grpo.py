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

from optimizers.backends.base import TrainJob, TrainResult, canonical
from optimizers.backends.options import RolloutOptions, TRLOptions
from optimizers.backends.rlm_rollout import check_playable
from optimizers.backends.trl_common import TRLBackend, trainer_arguments
from rlmkit.errors import ConfigError


@dataclass(frozen=True)
class TRLGRPOOptions(TRLOptions, RolloutOptions):
    """trl-grpo's options: the model file, TRL config fields, and how a row becomes an RLM run."""


class TRLGRPOBackend(TRLBackend):
    name = "trl-grpo"
    row_kinds: ClassVar = {"rl": ("rl",)}
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

    def records(self, job: TrainJob, rows: list[Any]) -> list[dict[str, Any]]:
        return [canonical(row) for row in rows]

    def train(self, job: TrainJob, prepared: TrainResult) -> TrainResult:
        from datasets import Dataset
        from trl import GRPOConfig, GRPOTrainer

        from optimizers.backends.base import read_rows
        from optimizers.backends.rlm_rollout import RLMRollout, rlm_reward

        rows = read_rows(job.output_dir / "data" / "train.jsonl")
        dataset = Dataset.from_list(
            [{"prompt": [m.model_dump(exclude_none=True) for m in row.prompt]} for row in rows]
        )
        rollout = RLMRollout(job, rows)
        options = self.options(job)
        config = GRPOConfig(
            num_generations=job.group_size,
            max_completion_length=job.max_completion_tokens,
            **trainer_arguments(job, options),
        )
        result = self.fit(
            job,
            options,
            GRPOTrainer,
            reward_funcs=rlm_reward,
            args=config,
            train_dataset=dataset,
            rollout_func=rollout,
        )
        summary = rollout.summary()
        (job.output_dir / "rollouts.json").write_text(json.dumps(summary))
        return result.model_copy(update={"metrics": {**result.metrics, **summary}})

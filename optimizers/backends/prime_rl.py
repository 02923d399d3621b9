"""prime-rl export: an ``rl.toml`` (or ``sft.toml``) plus a dataset folder, and the launch line.

Pinned schema: prime-rl 0.8.0 (its ``prime-rl-configs`` 0.4.0, commit 559b447 of
PrimeIntellect-ai/prime-rl). prime-rl's keys moved several times in 2026
(``rollouts_per_example`` -> ``group_size``, ``[[orchestrator.train.env]]`` ->
``[[orchestrator.train.source]]``, the repetition filter removed), so every TOML written here
is checked against a pydantic copy of exactly the keys we write, with ``extra="forbid"``:
a key prime-rl would reject is named before anyone rents a GPU. ``prime-rl-configs`` is not
on PyPI; where it is installed (``pip install ./packages/prime-rl-configs`` from the repo),
``validate_with_prime_rl`` checks the file against the real schema too.

RL runs need a verifiers environment that plays the RLM loop: the ``verifiers`` backend writes
one; this config names it (``options.env_id``) and tells it where the data is through
``env_vars`` (RLMKIT_DATASET, RLMKIT_MAX_TURNS).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from optimizers.backends.base import Backend, SchemaMismatchError, TrainJob, TrainResult, write_splits

PRIME_RL_VERSION = "0.8.0"
DEFAULT_ENV_ID = "rlmkit-rlm"


# ---------------------------------------------------------------- pinned schema (keys we write)
class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Model(_Table):
    name: str


class LoRA(_Table):
    rank: int = Field(ge=1)
    alpha: float = Field(ge=0)
    dropout: float = Field(0.0, ge=0, le=1)
    target_modules: list[str] | None = None


class TrainerModel(_Table):
    lora: LoRA | None = None


class Optim(_Table):
    lr: float = Field(gt=0)


class Trainer(_Table):
    optim: Optim
    model: TrainerModel | None = None


class Sampling(_Table):
    max_completion_tokens: int | None = None
    temperature: float = Field(1.0, ge=0, le=2.0)


class Taskset(_Table):
    id: str


class SourceEnv(_Table):
    taskset: Taskset


class Source(_Table):
    name: str
    env: SourceEnv


class Train(_Table):
    sampling: Sampling
    source: list[Source] = Field(min_length=1)


class OrchestratorLoRA(_Table):
    name: str


class OrchestratorModel(_Table):
    lora: OrchestratorLoRA


class Orchestrator(_Table):
    batch_size: int = Field(ge=1)
    group_size: int = Field(ge=1)
    train: Train
    model: OrchestratorModel | None = None


class Deployment(_Table):
    num_train_gpus: int = Field(1, ge=1)
    num_infer_gpus: int = Field(1, ge=1)


class Vllm(_Table):
    enable_lora: bool = False


class Inference(_Table):
    vllm: Vllm | None = None


class RLFile(_Table):
    max_steps: int = Field(ge=1)
    seq_len: int = Field(ge=1)
    output_dir: str
    env_vars: dict[str, str] = Field(default_factory=dict)
    deployment: Deployment
    model: Model
    orchestrator: Orchestrator
    trainer: Trainer
    inference: Inference
    ckpt: dict[str, Any] = Field(default_factory=dict)


class SFTData(_Table):
    name: str
    seq_len: int = Field(ge=1)
    batch_size: int = Field(ge=1)


class SFTModel(_Table):
    name: str
    lora: LoRA | None = None


class SFTFile(_Table):
    max_steps: int = Field(ge=1)
    output_dir: str
    deployment: Deployment
    model: SFTModel
    data: SFTData
    optim: Optim
    ckpt: dict[str, Any] = Field(default_factory=dict)


SCHEMAS: dict[str, type[BaseModel]] = {"rl": RLFile, "sft": SFTFile}


def check_prime_rl_toml(kind: str, text: str) -> dict[str, Any]:
    """Parse ``text`` and check it against the pinned schema; SchemaMismatchError names the key."""
    data = tomllib.loads(text)
    try:
        SCHEMAS[kind].model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(part) for part in first["loc"] if not isinstance(part, int)) or "<root>"
        raise SchemaMismatchError(
            f"prime-rl {PRIME_RL_VERSION} {kind}.toml: key {key!r}: {first['msg']}", key=key
        ) from exc
    return data


# ---------------------------------------------------------------- building the files
def _lora(job: TrainJob) -> dict[str, Any] | None:
    if job.lora is None:
        return None
    table: dict[str, Any] = {
        "rank": job.lora.rank,
        "alpha": float(job.lora.alpha),
        "dropout": job.lora.dropout,
    }
    if list(job.lora.targets) != ["all-linear"]:  # prime-rl's default list already covers every linear layer
        table["target_modules"] = list(job.lora.targets)
    return table


def _deployment(job: TrainJob) -> dict[str, int]:
    return {
        "num_train_gpus": int(job.options.get("num_train_gpus", 1)),
        "num_infer_gpus": int(job.options.get("num_infer_gpus", 1)),
    }


def rl_config(job: TrainJob, data_dir: Path) -> dict[str, Any]:
    env_id = job.options.get("env_id", DEFAULT_ENV_ID)
    config: dict[str, Any] = {
        "max_steps": job.steps,
        "seq_len": job.max_seq_len,
        "output_dir": str(job.output_dir.resolve() / "prime-rl" / "outputs"),
        "env_vars": {"RLMKIT_DATASET": str(data_dir.resolve()), "RLMKIT_MAX_TURNS": str(job.max_turns)},
        "deployment": _deployment(job),
        "model": {"name": job.base_model},
        "orchestrator": {
            "batch_size": job.batch_size,
            "group_size": job.group_size,
            "train": {
                "sampling": {"max_completion_tokens": job.max_completion_tokens},
                "source": [{"name": env_id, "env": {"taskset": {"id": env_id}}}],
            },
        },
        "trainer": {"optim": {"lr": job.lr}},
        "inference": {},
        "ckpt": {},
    }
    lora = _lora(job)
    if lora is not None:
        config["trainer"]["model"] = {"lora": lora}
        config["orchestrator"]["model"] = {"lora": {"name": f"rlmkit-r{job.lora.rank}"}}
        config["inference"]["vllm"] = {"enable_lora": True}
    return config


def sft_config(job: TrainJob, data_dir: Path) -> dict[str, Any]:
    model: dict[str, Any] = {"name": job.base_model}
    lora = _lora(job)
    if lora is not None:
        model["lora"] = lora
    return {
        "max_steps": job.steps,
        "output_dir": str(job.output_dir.resolve() / "prime-rl" / "outputs"),
        "deployment": _deployment(job),
        "model": model,
        "data": {"name": str(data_dir.resolve()), "seq_len": job.max_seq_len, "batch_size": job.batch_size},
        "optim": {"lr": job.lr},
        "ckpt": {},
    }


def _messages(messages: list[Any]) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in messages]


def prime_record(row: Any) -> dict[str, Any]:
    """SFT: prompt/completion message lists (prime-rl's SFT loader takes them as they are).
    RL: the verifiers dataset shape: prompt, answer, info (what the scorer needs), task."""
    if row.kind == "sft":
        return {"prompt": _messages(row.prompt), "completion": _messages(row.completion)}
    return {
        "prompt": _messages(row.prompt),
        "answer": row.answer,
        "info": {"example": row.example, "reward": row.reward.model_dump(), "row_id": row.id},
        "task": row.task_id,
    }


class PrimeRLBackend(Backend):
    name = "prime-rl"
    row_kinds: ClassVar = {"rl": ("rl",), "sft": ("sft",)}

    def prepare(self, job: TrainJob) -> TrainResult:
        import tomli_w

        validated = self.validate(job)
        folder = job.output_dir / "prime-rl"
        data_dir = folder / "data"
        files = write_splits(
            data_dir, {split: [prime_record(r) for r in rows] for split, rows in validated.splits.items()}
        )
        build = rl_config if job.kind == "rl" else sft_config
        text = f"# prime-rl {PRIME_RL_VERSION} config written by rlmkit\n" + tomli_w.dumps(
            build(job, data_dir)
        )
        check_prime_rl_toml(job.kind, text)
        config_path = folder / f"{job.kind}.toml"
        config_path.write_text(text)
        files.append(config_path)
        command = f"uv run {job.kind} @ {config_path.resolve()}"
        return self.exported(
            validated,
            config_path,
            files,
            artifact_kind="config",
            command=command,
            message=f"in a prime-rl {PRIME_RL_VERSION} checkout: {command}"
            + (
                f" (install the verifiers environment {job.options.get('env_id', DEFAULT_ENV_ID)!r} first: "
                "rlmkit train --backend verifiers ...)"
                if job.kind == "rl"
                else ""
            ),
        )

    def run(self, job: TrainJob, dry_run: bool = False) -> TrainResult:
        return self.prepare(job)  # prime-rl runs where the GPUs are: `rlmkit train` prints result.command


def validate_with_prime_rl(kind: str, path: Path) -> None:
    """Check a written file against the real ``prime-rl-configs`` schema (when it is installed)."""
    data = tomllib.loads(path.read_text())
    if kind == "rl":
        from prime_rl.configs.rl import RLConfig as Schema
    else:
        from prime_rl.configs.sft import SFTConfig as Schema
    Schema.model_validate(data)

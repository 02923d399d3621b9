"""What the TRL backends share: ``TRLBackend`` (export each split as the trainer's records,
then load the base model offline, train with the LoRA config and the arguments every TRL config
takes, and save the adapter with its metrics); each backend says only what differs."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, ClassVar

from optimizers.backends.base import (
    Backend,
    Dependency,
    TrainJob,
    TrainResult,
    resolve_local_model,
    write_splits,
)
from optimizers.backends.options import TRLOptions

TRL_DEPS = (
    Dependency("torch", "train"),
    Dependency("transformers", "train"),
    Dependency("trl", "train"),
    Dependency("peft", "train"),
    Dependency("datasets", "train"),
    Dependency("accelerate", "train"),
)


def chat_messages(messages: list[Any]) -> list[dict[str, str]]:
    """Canonical chat messages as the role/content dicts TRL's conversational datasets hold."""
    return [{"role": m.role, "content": m.content} for m in messages]


def load_model_and_tokenizer(job: TrainJob, options: TRLOptions) -> tuple[Any, Any]:
    """Load the base model from disk only. A GGUF file is dequantized by transformers; its
    quantizer flag is cleared so the trainer accepts the model as an ordinary float one."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = resolve_local_model(job.base_model)
    gguf = options.gguf_file
    kwargs: dict[str, Any] = {"local_files_only": True}
    if gguf:
        kwargs["gguf_file"] = gguf
    dtype = torch.bfloat16 if torch.cuda.is_available() else torch.float32
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=dtype, **kwargs)
    if gguf:
        model.is_quantized = False
        model.hf_quantizer = None
    tokenizer = AutoTokenizer.from_pretrained(str(folder), **kwargs)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if options.chat_template:
        tokenizer.chat_template = Path(options.chat_template).read_text()
    if not tokenizer.chat_template:
        from rlmkit.errors import ConfigError

        raise ConfigError(
            f"{job.base_model} has no chat template; set options.chat_template to a .jinja file "
            "(TRL ships some under trl/chat_templates/)"
        )
    return model, tokenizer


def module_names(base_model: str, gguf_file: str | None = None) -> list[str]:
    """The module names of ``base_model``'s causal LM (what peft's keys are made of), from its
    config alone: the model is built on the meta device, no weight is read."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    kwargs: dict[str, Any] = {"local_files_only": True} | ({"gguf_file": gguf_file} if gguf_file else {})
    config = AutoConfig.from_pretrained(str(resolve_local_model(base_model)), **kwargs)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return [name for name, _ in model.named_modules()]


def lora_config(job: TrainJob) -> Any:
    if job.lora is None:
        return None
    from peft import LoraConfig

    targets = list(job.lora.targets)
    return LoraConfig(
        r=job.lora.rank,
        lora_alpha=job.lora.alpha,
        lora_dropout=job.lora.dropout,
        target_modules="all-linear" if targets == ["all-linear"] else targets,
        task_type="CAUSAL_LM",
    )


def continued_adapter(model: Any, folder: Path) -> Any:
    """``model`` with the peft LoRA adapter in ``folder`` loaded trainable. TRL's trainers take such
    a model as it is; DPOTrainer copies the adapter as its reference, so DPO after SFT measures
    the policy against the SFT model rather than the bare base."""
    from peft import PeftModel

    from rlmkit.errors import ConfigError

    if not (folder / "adapter_config.json").is_file():
        raise ConfigError(
            f"options.init_adapter {folder} is not a peft adapter folder (no adapter_config.json)"
        )
    return PeftModel.from_pretrained(model, str(folder), is_trainable=True)


def cpu_has_bf16() -> bool:
    """Whether this CPU computes bfloat16 natively (avx512_bf16 or AMX): then autocast to bf16
    halves a training step; elsewhere bf16 is emulated and slower than float32."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return " avx512_bf16" in flags or " amx_bf16" in flags


def precision(job: TrainJob) -> str:
    """``bf16`` (autocast; the weights stay float32 on a CPU) or ``fp32``, from ``options.precision``
    (``auto``, the default: bf16 on a GPU or a CPU with native bf16, else fp32)."""
    return resolved_precision(TRLOptions.part(job.options).precision)


def resolved_precision(wanted: str) -> str:
    """``precision``'s rule for an already-parsed ``options.precision``."""
    import torch

    if wanted != "auto":
        return wanted
    return "bf16" if torch.cuda.is_available() or cpu_has_bf16() else "fp32"


def trainer_arguments(job: TrainJob, options: TRLOptions) -> dict[str, Any]:
    """Fields every TRL config shares.

    With ``options.save_every`` a checkpoint (adapter, optimizer, schedule, data order, random
    state) is written every that many steps and only the latest kept, so a long CPU run stopped
    part way goes on from there (``resume_point``); without it the adapter is saved once, at the end."""
    import torch

    on_gpu = torch.cuda.is_available()
    every = options.save_every
    saving = {"save_strategy": "steps", "save_steps": every, "save_total_limit": 1} if every else {}
    return {
        "output_dir": str(job.output_dir / "trainer"),
        "max_steps": job.steps,
        "learning_rate": job.lr,
        "per_device_train_batch_size": job.batch_size,
        "seed": job.seed,
        "logging_steps": 1,
        "save_strategy": "no",
        **saving,
        "report_to": "none",
        "use_cpu": not on_gpu,
        "bf16": resolved_precision(options.precision) == "bf16",
        "disable_tqdm": True,
        **options.trainer,  # any other field of the TRL config, passed through
    }


def finish(backend: str, job: TrainJob, trainer: Any) -> TrainResult:
    """Save the adapter (or full model) and the log history; summarise the metrics."""
    artifact = job.output_dir / ("adapter" if job.lora is not None else "model")
    trainer.save_model(str(artifact))
    trainer.processing_class.save_pretrained(str(artifact))
    history = trainer.state.log_history
    (job.output_dir / "log_history.json").write_text(json.dumps(history, indent=1))
    losses = [entry["loss"] for entry in history if "loss" in entry]
    metrics = {"steps": float(trainer.state.global_step)}
    if losses:
        metrics.update(first_loss=float(losses[0]), last_loss=float(losses[-1]))
    for entry in history:
        for key in ("train_runtime", "train_samples_per_second", "reward", "train_loss"):
            if key in entry:
                metrics[key] = float(entry[key])
    return TrainResult(
        backend=backend,
        status="trained",
        artifact=artifact,
        artifact_kind="lora_adapter" if job.lora is not None else "model",
        metrics=metrics,
        command=launch_command(backend, job),
    )


def launch_command(backend: str, job: TrainJob) -> str:
    """The same job on several GPUs: accelerate starts one process per GPU running the CLI verb."""
    return f"accelerate launch -m rlmkit train --backend {backend} {job.output_dir / 'job.toml'}"


def resume_point(job: TrainJob) -> Path | None:
    """The latest checkpoint a stopped run of this job left in ``output_dir/trainer``, or None."""
    from transformers.trainer_utils import get_last_checkpoint

    folder = job.output_dir / "trainer"
    last = get_last_checkpoint(str(folder)) if folder.is_dir() else None
    return Path(last) if last else None


def write_job_file(job: TrainJob) -> Path:
    """Write the job into its folder. A folder holding another job's checkpoint is refused: going
    on from it would train one job's adapter on another's data or settings."""
    job.output_dir.mkdir(parents=True, exist_ok=True)
    path = job.output_dir / "job.toml"
    absolute = job.model_copy(
        update={"dataset": job.dataset.resolve(), "output_dir": job.output_dir.resolve()}
    )
    if (checkpoint := resume_point(job)) is not None and path.is_file() and TrainJob.load(path) != absolute:
        from rlmkit.errors import ConfigError

        raise ConfigError(
            f"{job.output_dir} holds {checkpoint.name} of another job ({path} differs from this one): "
            "use another output_dir, or delete its trainer/ folder to start again"
        )
    path.write_text(absolute.dump_toml())
    return path


class TRLBackend(Backend):
    """A backend that trains with one TRL trainer. A subclass gives ``records`` (its rows as the
    trainer's dataset records) and ``train`` (the trainer's config and data, handed to ``fit``)."""

    requires = TRL_DEPS
    needs_local_model = True
    row_kinds: ClassVar = {}

    def records(self, job: TrainJob, rows: list[Any]) -> list[dict[str, Any]]:
        raise NotImplementedError

    def train(self, job: TrainJob, prepared: TrainResult) -> TrainResult:
        raise NotImplementedError

    def prepare(self, job: TrainJob) -> TrainResult:
        validated = self.validate(job)
        folder = job.output_dir / "data"
        records = {split: self.records(job, rows) for split, rows in validated.splits.items()}
        files = [write_job_file(job), *write_splits(folder, records)]
        return self.exported(validated, folder, files, command=launch_command(self.name, job))

    def run(self, job: TrainJob, dry_run: bool = False) -> TrainResult:
        prepared = self.prepare(job)
        return prepared if dry_run else self.train(job, prepared)

    def fit(
        self, job: TrainJob, options: TRLOptions, trainer_type: Any, **trainer_fields: Any
    ) -> TrainResult:
        """Train ``trainer_type`` on the base model with this job's LoRA (or, with
        ``options.init_adapter``, on from that adapter), then save and summarise. ``options``:
        the job's options, parsed once by the backend (``self.options(job)``)."""
        model, tokenizer = load_model_and_tokenizer(job, options)
        peft_config = lora_config(job)
        if (start := options.init_adapter) is not None:
            if job.lora is None:
                from rlmkit.errors import ConfigError

                raise ConfigError(
                    "options.init_adapter goes on training a LoRA adapter: give the job a [lora] table"
                )
            model, peft_config = continued_adapter(model, Path(start)), None
        trainer = trainer_type(
            model=model, processing_class=tokenizer, peft_config=peft_config, **trainer_fields
        )
        if (checkpoint := resume_point(job)) is not None:
            print(f"resuming {job.output_dir} from {checkpoint.name} of {job.steps} steps", file=sys.stderr)
        trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
        return finish(self.name, job, trainer)

    def fit_splits(
        self, job: TrainJob, options: TRLOptions, prepared: TrainResult, trainer_type: Any, args: Any
    ) -> TrainResult:
        """``fit`` on the exported splits: train on ``train``, evaluate on ``validation`` if any."""
        from datasets import load_dataset

        files = {f.stem: str(f) for f in prepared.files if f.suffix == ".jsonl"}
        data = load_dataset("json", data_files=files)
        return self.fit(
            job,
            options,
            trainer_type,
            args=args,
            train_dataset=data["train"],
            eval_dataset=data.get("validation"),
        )

"""What the TRL backends share: loading the base model offline, the LoRA config, the
trainer arguments every TRL config takes, and saving the adapter with its metrics."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from optimizers.backends.base import Dependency, TrainJob, TrainResult, resolve_local_model
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


def load_model_and_tokenizer(job: TrainJob) -> tuple[Any, Any]:
    """Load the base model from disk only. A GGUF file is dequantized by transformers; its
    quantizer flag is cleared so the trainer accepts the model as an ordinary float one."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = resolve_local_model(job.base_model)
    options = TRLOptions.part(job.options)
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
    import torch

    wanted = TRLOptions.part(job.options).precision
    if wanted != "auto":
        return wanted
    return "bf16" if torch.cuda.is_available() or cpu_has_bf16() else "fp32"


def trainer_arguments(job: TrainJob) -> dict[str, Any]:
    """Fields every TRL config shares.

    Checkpoints are not written mid-run: the adapter is saved once at the end."""
    import torch

    on_gpu = torch.cuda.is_available()
    return {
        "output_dir": str(job.output_dir / "trainer"),
        "max_steps": job.steps,
        "learning_rate": job.lr,
        "per_device_train_batch_size": job.batch_size,
        "seed": job.seed,
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": "none",
        "use_cpu": not on_gpu,
        "bf16": precision(job) == "bf16",
        "disable_tqdm": True,
        **TRLOptions.part(job.options).trainer,  # any other field of the TRL config, passed through
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


def write_job_file(job: TrainJob) -> Path:
    job.output_dir.mkdir(parents=True, exist_ok=True)
    path = job.output_dir / "job.toml"
    absolute = {"dataset": job.dataset.resolve(), "output_dir": job.output_dir.resolve()}
    path.write_text(job.model_copy(update=absolute).dump_toml())
    return path

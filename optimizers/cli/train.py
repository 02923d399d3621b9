"""``rlmkit train``: hand a compiled dataset to a training backend.

    rlmkit train --backend trl-sft job.toml
    rlmkit train --backend prime-rl --kind rl --dataset data/ --base-model Qwen/Qwen3-8B --out out/
    rlmkit train --backend trl-grpo job.toml --steps 2 --dry-run
    rlmkit train --list

A job file holds ``TrainJob``'s fields at the top level (``[lora]`` and ``[options]`` as
tables); flags override it, or describe the whole job without a file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from rlmkit.cli.common import exit_on_error
from rlmkit.errors import install_hint

out = Console(soft_wrap=True)


def _option_pairs(pairs: list[str]) -> dict[str, Any]:
    """``name=value`` flags; values are parsed as JSON when they can be (numbers, booleans, lists)."""
    options: dict[str, Any] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise typer.BadParameter(f"--option takes name=value, got {pair!r}")
        try:
            options[name] = json.loads(value)
        except ValueError:
            options[name] = value
    return options


def train_command(
    job_file: Annotated[
        Path | None, typer.Argument(help="Job TOML (TrainJob fields); flags override it.")
    ] = None,
    backend: Annotated[
        str | None,
        typer.Option(
            "--backend",
            "-b",
            help="trl-sft, trl-dpo, trl-grpo, prime-rl, verifiers, tinker, openai-jsonl.  "
            "[required, except with --list]",
        ),
    ] = None,
    kind: Annotated[str | None, typer.Option("--kind", help="sft, rl or dpo.")] = None,
    dataset: Annotated[
        Path | None, typer.Option("--dataset", help="Canonical JSONL file or folder (rlmkit compile --out).")
    ] = None,
    base_model: Annotated[
        str | None, typer.Option("--base-model", help="Local model folder or Hugging Face id.")
    ] = None,
    output_dir: Annotated[
        Path | None, typer.Option("--out", help="Where data, configs and adapters are written.")
    ] = None,
    steps: Annotated[int | None, typer.Option("--steps", help="Optimizer steps.")] = None,
    lr: Annotated[float | None, typer.Option("--lr", help="Learning rate.")] = None,
    batch_size: Annotated[
        int | None, typer.Option("--batch-size", help="Samples per step (rl: prompts x group).")
    ] = None,
    group_size: Annotated[int | None, typer.Option("--group-size", help="Rollouts per prompt (rl).")] = None,
    max_turns: Annotated[int | None, typer.Option("--max-turns", help="Root turns per rollout (rl).")] = None,
    lora_rank: Annotated[
        int | None, typer.Option("--lora-rank", help="LoRA rank (0: train all weights).")
    ] = None,
    option: Annotated[
        list[str] | None, typer.Option("--option", "-o", help="Backend option name=value (repeatable).")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Validate and write the converted data/config; do not train.")
    ] = False,
    list_backends: Annotated[
        bool, typer.Option("--list", help="List the backends and the packages each one misses.")
    ] = False,
) -> None:
    """Train with a backend, or export a job for training elsewhere.

    `rlmkit train --list` names the backends and what each one still needs.
    """
    with exit_on_error():
        if list_backends:
            _list()
            return
        flags = {
            "kind": kind,
            "dataset": dataset,
            "base_model": base_model,
            "output_dir": output_dir,
            "steps": steps,
            "lr": lr,
            "batch_size": batch_size,
            "group_size": group_size,
            "max_turns": max_turns,
        }
        _run(job_file, backend, flags, lora_rank, option, dry_run)


def _list() -> None:
    from optimizers.backends.base import BACKENDS, get_backend

    for name in BACKENDS:
        missing = get_backend(name).missing_deps()
        if not missing:
            out.print(f"{name:14} ready")
            continue
        modules = ", ".join(d.module for d in missing)
        extras = sorted({d.extra for d in missing})
        # escape(): rich would take "[train]" for a style tag and print nothing of it
        out.print(f"{name:14} needs {modules}: the {'/'.join(extras)} extra, {escape(install_hint(*extras))}")


def _run(job_file, backend, flags: dict[str, Any], lora_rank, option, dry_run) -> None:
    from optimizers.backends.base import TrainJob, TrainJobError, get_backend

    if not backend:
        raise TrainJobError("--backend is required (see rlmkit train --list)")
    flags = {key: value for key, value in flags.items() if value is not None}
    if job_file is not None:
        base = TrainJob.load(job_file)
        fields = base.model_dump(exclude_unset=False) | flags
    else:
        fields = flags
    if lora_rank is not None:
        fields["lora"] = None if lora_rank == 0 else {**dict(fields.get("lora") or {}), "rank": lora_rank}
    if option:  # None when the flag is not given
        fields["options"] = {**dict(fields.get("options") or {}), **_option_pairs(option)}
    job = TrainJob.build(**fields)
    result = get_backend(backend).run(job, dry_run=dry_run)
    out.print(
        f"[bold]{result.backend}[/bold]: {result.status}"
        + (f" -> {escape(str(result.artifact))}" if result.artifact else "")
    )
    for key, value in sorted(result.metrics.items()):
        out.print(f"  {key} = {value:g}")
    if result.command:
        out.print(f"launch: {escape(result.command)}")
    if result.message:
        out.print(escape(result.message))


def register(app: typer.Typer) -> None:
    app.command("train")(train_command)

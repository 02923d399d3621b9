"""``rlmkit train-loop``: an outer loop whose reward is how much a training job improved the model.

Wiring only (this verb is where programs and optimizers meet, lazily, when it runs): training
data comes from the runs in ``--runs`` (e.g. written by ``rlmkit eval``), compiled per job; the
base and each trained model are served on 127.0.0.1 and scored with ``programs.evaluate`` on
freshly generated examples of every family, held-out families included. The best job is picked
on those; its reported reward comes from a second, disjoint test set (other seeds).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.live import Live
from rich.table import Table

from rlmkit.cli.common import console, exit_on_error, lm_from_flag


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _table(records: list[Any]) -> Table:
    table = Table(title="train-loop jobs")
    for column in ("job", "state", "reward", "seen", "withheld", "wall s", "reason"):
        table.add_column(column)
    for r in records:

        def fmt(v):
            return "" if v is None else f"{v:+.3f}"

        table.add_row(
            str(r.index),
            r.state,
            fmt(r.reward),
            fmt(r.reward_seen),
            fmt(r.reward_withheld),
            f"{r.wall_s:.0f}",
            (r.reason or "")[:60],
        )
    return table


def train_loop(
    families: str = typer.Option(..., help="task families jobs may train on, comma-separated"),
    runs: Path = typer.Option(
        ..., exists=True, help="trajectories to compile training data from (rlmkit eval --out)"
    ),
    base_model: str = typer.Option(..., help="local model folder (transformers) to train and evaluate"),
    gguf_file: str = typer.Option(
        None,
        help="a GGUF file in --base-model to train from (dequantised) and evaluate with llama.cpp "
        "(e.g. a student from optimizers.students)",
    ),
    out: Path = typer.Option(Path("runs/train-loop"), help="where jobs, study and report go (resumable)"),
    held_out: str = typer.Option("", help="families withheld from every job, evaluated only"),
    lengths: str = typer.Option("2000,8000", help="context lengths of the runs a job may train on"),
    steps: str = typer.Option("2,10,50", help="optimizer steps a job may take (size them to --timeout)"),
    lora_ranks: str = typer.Option("0,8,16", help="LoRA ranks a job may use; 0 trains every weight"),
    batch_sizes: str = typer.Option("1,2,4", help="batch sizes a job may use"),
    proposer: str = typer.Option("optuna", help="optuna | lm"),
    jobs: int = typer.Option(4, min=1, help="how many jobs to run in total (a re-run resumes)"),
    backend: str = typer.Option("trl-sft", help="training backend adapter"),
    lm: str = typer.Option(None, help="model for the lm proposer (litellm string; default: embedded)"),
    eval_n: int = typer.Option(4, help="evaluation examples per family (they pick the best job)"),
    test_n: int = typer.Option(4, min=1, help="test examples per family (the best job's reported reward)"),
    eval_length: int = typer.Option(4_000, help="evaluation context length in characters"),
    eval_iterations: int = typer.Option(6, help="max_iterations of the evaluated RLM"),
    eval_max_tokens: int = typer.Option(512, help="tokens the evaluated model may write per turn"),
    ray: str = typer.Option(None, "--ray", help="Ray address to run jobs on ('local' starts one here)"),
    timeout: float = typer.Option(3600.0, help="seconds a job may run"),
) -> None:
    """Propose training jobs, run them, and reward each by its gain.

    A job's reward is the model's measured improvement on held-out examples.
    """
    with exit_on_error():
        _run(**locals())


def _run(
    *,
    families,
    runs,
    base_model,
    gguf_file,
    out,
    held_out,
    lengths,
    steps,
    lora_ranks,
    batch_sizes,
    proposer,
    jobs,
    backend,
    lm,
    eval_n,
    test_n,
    eval_length,
    eval_iterations,
    eval_max_tokens,
    ray,
    timeout,
) -> None:
    from optimizers.trainloop import (
        JobSpace,
        LMProposer,
        LocalExecutor,
        OptunaProposer,
        RayExecutor,
        TrainTuner,
    )
    from optimizers.trainloop.served import build_dataset_from_runs, evaluate_served, serve_llama_cpp
    from programs.evaluate import evaluate
    from programs.suite_programs import program_for
    from programs.tasks import generate

    out.mkdir(parents=True, exist_ok=True)
    held = _split(held_out)
    space = JobSpace(
        families=_split(families) + [h for h in held if h not in _split(families)],
        held_out=held,
        backends=[backend],
        lengths=[int(x) for x in _split(lengths)],
        steps=[int(x) for x in _split(steps)],
        lora_ranks=[int(x) for x in _split(lora_ranks)],
        batch_sizes=[int(x) for x in _split(batch_sizes)],
    )
    if proposer == "optuna":
        job_writer = OptunaProposer(space, f"sqlite:///{out / 'study.db'}")
    elif proposer == "lm":
        job_writer = LMProposer(space, lm_from_flag(lm), log_dir=out / "proposer")
    else:
        raise typer.BadParameter("--proposer must be optuna or lm")
    executor = (
        RayExecutor(None if ray == "local" else ray, timeout_s=timeout) if ray else LocalExecutor(timeout)
    )

    def examples(n: int, seed: int) -> list[Any]:
        return [
            ex
            for i, family in enumerate(space.families)
            for ex in generate(family, n=n, length=eval_length, seed=seed + i)
        ]

    tuner = TrainTuner(
        proposer=job_writer,
        build_dataset=build_dataset_from_runs(runs),
        evaluate=evaluate_served(
            eval_iterations,
            2,
            eval_max_tokens,
            program_for=program_for,
            evaluate=evaluate,
            serve=serve_llama_cpp(Path(base_model) / gguf_file, eval_max_tokens) if gguf_file else None,
        ),
        job_options={"gguf_file": gguf_file} if gguf_file else None,
        eval_examples=examples(eval_n, 10_000),
        test_examples=examples(test_n, 20_000),  # never used to pick a job
        base_model=base_model,
        out_dir=out,
        executor=executor,
    )
    seen: list[Any] = list(tuner.history())
    with Live(_table(seen), console=console, refresh_per_second=2) as live:
        report = tuner.run(jobs, on_record=lambda r: (seen.append(r), live.update(_table(seen))))
    plot = report.plot(out / "rewards.png")
    best = report.best
    console.print(f"reward curve: {plot}; jobs: {out / 'jobs.jsonl'}")
    if best is not None:
        console.print(
            f"best job #{best.index}: reward {best.reward:+.3f} on the evaluation set that picked it "
            f"-> {best.artifact}"
        )
        console.print(
            f"best job #{best.index} on the test set: reward {report.test['reward']:+.3f} "
            f"(base {report.test['pre']}, trained {report.test['post']})"
        )


def register(app: typer.Typer) -> None:
    app.command("train-loop")(train_loop)

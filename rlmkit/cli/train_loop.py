"""``rlmkit train-loop``: an outer loop whose reward is how much a training job improved the model.

Wiring only (the CLI is where programs and optimizers meet): training data comes from the
runs in ``--runs`` (e.g. written by ``rlmkit eval``), compiled per job; the base and each
trained model are served on 127.0.0.1 and scored with ``programs.evaluate`` on freshly
generated examples of every family, held-out families included.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.live import Live
from rich.table import Table

console = Console(stderr=True)


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def build_dataset_from_runs(runs_dir: Path):
    """A ``build_dataset`` for TrainTuner: compile the runs of the job's families."""
    from optimizers.compile import Filters, compile_sft, load_runs
    from optimizers.trainloop import BuiltDataset

    runs = load_runs(runs_dir).runs

    def build(proposal: Any, out: Path) -> BuiltDataset:
        chosen = [
            r
            for r in runs
            if r.meta.depth == 0
            and r.meta.task.get("suite") in proposal.families
            and r.meta.task.get("length", 0) <= proposal.length
        ]
        result = compile_sft(chosen, filters=Filters(min_score=proposal.min_score))
        result.write(out, seed=0, val_fraction=0.1)
        return BuiltDataset(out, {str(r.meta.task.get("example_id")) for r in chosen})

    return build


def evaluate_served(max_iterations: int, workers: int, max_tokens: int):
    """An ``evaluate`` for TrainTuner: serve the model, run each family's RLM program, mean score per family."""
    import rlmkit
    from optimizers.trainloop.hf_serve import serve_hf
    from programs.evaluate import evaluate
    from programs.suite_programs import program_for

    def run(model: Any, examples: list[Any]) -> dict[str, float]:
        server = serve_hf(model.base_model, model.adapter, max_new_tokens=max_tokens)
        try:
            lm = rlmkit.LM("openai/local", api_base=server.url, api_key="local", cache=False)
            scores: dict[str, float] = {}
            for family in sorted({ex.suite for ex in examples}):
                subset = [ex for ex in examples if ex.suite == family]
                result = evaluate(
                    lambda f=family: program_for(f, lm=lm, max_iterations=max_iterations),
                    subset,
                    workers=workers,
                )
                scores[family] = result.mean
            return scores
        finally:
            server.stop()

    return run


def _table(records: list[Any]) -> Table:
    table = Table(title="train-loop jobs")
    for column in ("job", "state", "reward", "seen", "withheld", "wall s", "reason"):
        table.add_column(column)
    for r in records:
        fmt = lambda v: "" if v is None else f"{v:+.3f}"
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
    out: Path = typer.Option(Path("runs/train-loop"), help="where jobs, study and report go (resumable)"),
    held_out: str = typer.Option("", help="families withheld from every job, evaluated only"),
    proposer: str = typer.Option("optuna", help="optuna | lm"),
    jobs: int = typer.Option(4, min=1, help="how many jobs to run in total (a re-run resumes)"),
    backend: str = typer.Option("trl-sft", help="training backend adapter"),
    lm: str = typer.Option(None, help="model for the lm proposer (litellm string)"),
    eval_n: int = typer.Option(4, help="evaluation examples per family"),
    eval_length: int = typer.Option(4_000, help="evaluation context length in characters"),
    eval_iterations: int = typer.Option(6, help="max_iterations of the evaluated RLM"),
    eval_max_tokens: int = typer.Option(512, help="tokens the evaluated model may write per turn"),
    ray: str = typer.Option(None, "--ray", help="Ray address to run jobs on ('local' starts one here)"),
    timeout: float = typer.Option(3600.0, help="seconds a job may run"),
) -> None:
    """Propose training jobs, run them, reward each by the model's measured improvement."""
    import rlmkit
    from optimizers.trainloop import (
        JobSpace,
        LMProposer,
        LocalExecutor,
        OptunaProposer,
        RayExecutor,
        TrainTuner,
    )
    from programs.tasks import generate

    out.mkdir(parents=True, exist_ok=True)
    held = _split(held_out)
    space = JobSpace(
        families=_split(families) + [h for h in held if h not in _split(families)],
        held_out=held,
        backends=[backend],
    )
    if proposer == "optuna":
        job_writer = OptunaProposer(space, f"sqlite:///{out / 'study.db'}")
    elif proposer == "lm":
        job_writer = LMProposer(
            space, rlmkit.LM(lm) if lm else rlmkit.lm.resolve_lm(None), log_dir=out / "proposer"
        )
    else:
        raise typer.BadParameter("--proposer must be optuna or lm")
    executor = (
        RayExecutor(None if ray == "local" else ray, timeout_s=timeout) if ray else LocalExecutor(timeout)
    )
    examples = [
        ex
        for i, family in enumerate(space.families)
        for ex in generate(family, n=eval_n, length=eval_length, seed=10_000 + i)
    ]
    tuner = TrainTuner(
        proposer=job_writer,
        build_dataset=build_dataset_from_runs(runs),
        evaluate=evaluate_served(eval_iterations, 2, eval_max_tokens),
        eval_examples=examples,
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
        console.print(f"best job #{best.index}: reward {best.reward:+.3f} -> {best.artifact}")


def register(app: typer.Typer) -> None:
    app.command("train-loop")(train_loop)

"""``rlmkit optimize SUITE``: tune an RLM on a task suite for accuracy and cost (optuna).

This verb is the one place that wires a task suite (``programs.tasks``) to the tuner: the
suite gives train examples and its scorer becomes the metric. The tuner itself never imports
a program; only this command-line wiring does, lazily, when the verb runs.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from rlmkit.cli.common import console, exit_on_error, lm_from_flag
from rlmkit.errors import UserError


def _objectives(text: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    if names not in (("accuracy", "cost"), ("accuracy",)):
        raise UserError(f"--objective must be 'accuracy,cost' or 'accuracy', got {text!r}")
    return names


def _int_range(text: str, option: str) -> tuple[int, int]:
    try:
        low, _, high = text.partition(":")
        return int(low), int(high or low)
    except ValueError:
        raise UserError(f"{option} takes LOW:HIGH (e.g. 3:12), got {text!r}") from None


class _TrialProgress:
    """One bar for the study's trials (finished by any worker), one for the examples of this
    worker's trial."""

    def __init__(self, progress, n_trials: int):
        self.progress = progress
        self.trials = progress.add_task("trials", total=n_trials)
        self.examples = progress.add_task("trial", total=1, visible=False)

    def __call__(self, event: str, **info) -> None:
        if event == "bootstrap":  # runs of the base program before the search, for proposals/demos
            self.progress.console.print(f"bootstrap run {info['done'] + 1}/{info['total']}")
        elif event == "trial_start":
            self.progress.reset(
                self.examples, total=info["total"], visible=True, description=f"trial {info['number']}"
            )
        elif event == "example":
            self.progress.update(self.examples, completed=info["done"])
        elif event == "study":  # the whole study's count: trials finished by every worker
            others = f", {info['running']} running" if info["running"] else ""
            self.progress.update(
                self.trials, completed=info["done"], description=f"trials (all workers{others})"
            )
        elif event == "trial_end":
            note = info.get("error") or (
                f"accuracy={info['accuracy']:.3g} cost={info['cost']:.4g}" if "accuracy" in info else ""
            )
            self.progress.console.print(f"trial {info['number']}: {info['state']} {escape(str(note))[:160]}")


def optimize(
    suite: str = typer.Argument(..., help="Task suite name (see `rlmkit eval --help` for the list)."),
    lm: str = typer.Option(
        "local", "--lm", help="Root model: a litellm model string, or 'local' (the embedded model)."
    ),
    api_base: str = typer.Option(None, "--api-base", help="OpenAI-compatible server URL for --lm."),
    trials: int = typer.Option(20, "--trials", help="Finished trials the study should hold."),
    objective: str = typer.Option(
        "accuracy,cost", "--objective", help="'accuracy,cost' (Pareto) or 'accuracy'."
    ),
    cost_unit: str = typer.Option("tokens", "--cost-unit", help="usd or tokens (mean per example)."),
    cost_cap: float = typer.Option(
        None, "--cost-cap", help="With --objective accuracy: max mean cost per example."
    ),
    storage: str = typer.Option(
        None, "--storage", help="Optuna storage URL; default: DIR/study.db (resumable)."
    ),
    study_name: str = typer.Option(None, "--study", help="Study name (default: the suite's name)."),
    out: Path = typer.Option(
        Path("rlmkit-optimize"), "--out", help="Directory for the study, table, plot, program."
    ),
    n_train: int = typer.Option(8, "--n-train", help="Train examples generated from the suite."),
    length: int = typer.Option(4_000, "--length", help="Context length of each example, in characters."),
    seed: int = typer.Option(0, "--seed"),
    max_iterations: str = typer.Option(
        "3:10", "--max-iterations", help="Range LOW:HIGH searched for max_iterations."
    ),
    propose: int = typer.Option(
        3, "--propose", help="Instructions the LM proposes from bootstrap runs (0: none)."
    ),
    demos: int = typer.Option(2, "--demos", help="Largest number of demos a trial may use (0: none)."),
    sandbox: str = typer.Option(
        "process", "--sandbox", help="process (confined worker) or inline (debugging)."
    ),
) -> None:
    """Tune instructions, demos and max_iterations on a task suite.

    Prints the Pareto table (accuracy against cost) at the end.
    """
    with exit_on_error():
        _run(**locals())


def _run(
    *,
    suite,
    lm,
    api_base,
    trials,
    objective,
    cost_unit,
    cost_cap,
    storage,
    study_name,
    out,
    n_train,
    length,
    seed,
    max_iterations,
    propose,
    demos,
    sandbox,
) -> None:
    # Everything that can be wrong on the command line is checked before any model call.
    import optuna
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from optimizers import Bootstrap, IntKnob, RLMTuner, SearchSpace
    from programs import program_for
    from programs.tasks import get_suite

    optuna.logging.set_verbosity(optuna.logging.WARNING)  # the progress lines say it once, shorter
    objectives = _objectives(objective)
    low, high = _int_range(max_iterations, "--max-iterations")
    task = get_suite(suite)  # an unknown suite is a UserError naming the known ones
    examples = task.generate(n_train, length, seed)
    model = lm_from_flag(lm, api_base)
    base = program_for(suite, lm=model, max_iterations=high, sandbox=sandbox)
    tuner = RLMTuner(
        base,
        task.score,
        examples,
        space=SearchSpace(knobs=[IntKnob("max_iterations", low, high)], max_demos=demos),
        objectives=objectives,
        cost_unit=cost_unit,
        cost_cap=cost_cap,
        n_trials=trials,
        storage=storage,
        study_name=study_name or suite,
        out_dir=out,
        proposer_lm=model if propose else None,
        bootstrap=Bootstrap(examples=min(4, len(examples)), n_instructions=propose, max_demos=demos),
        seed=seed,
    )
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console) as progress:
        result = tuner.fit(on_progress=_TrialProgress(progress, trials))
    out.mkdir(parents=True, exist_ok=True)
    table = result.to_table()
    (out / "front.txt").write_text(table + "\n")
    plot = None
    if result.trial is not None:
        try:
            plot = result.plot(out / "front.png")
        except UserError as exc:  # matplotlib missing: the study and table are still good
            console.print(f"[yellow]no plot:[/yellow] {escape(str(exc))}")
    if result.program is not None:
        result.save(out / "best")
    print(f"Pareto front ({len(result.front)} of {len(result.rows)} trials):")
    print(table)
    if result.trial is not None:
        print(f"\nchosen: trial {result.trial.number}; program saved in {out / 'best'}; plot {plot}")


def register(app: typer.Typer) -> None:
    app.command("optimize")(optimize)

"""``rlmkit self-train SUITE...``: a model's own filtered runs fine-tune it; both measured, paired.
(``ship``, ``hold-back`` and ``read-test``, the release path's verbs, are in ``release.py``.)

    rlmkit self-train needle --lm local --samples 4 --out runs/self-train
    rlmkit self-train needle:20000:16 aggregation:20000:8 --held-out multihop:20000:10 --out DIR
    rlmkit self-train needle --out DIR --archive results/self-train   # each finished stage packed
    rlmkit self-train --recipe recipe.toml --out DIR   # suites, lengths, hints, filters, DPO in a file
    rlmkit self-train --recipe recipe.toml --out DIR --close-sampling --stages dataset,train

Stages (see ``optimizers.selftrain``): sample each suite on training seeds, compile SFT and DPO
data, train a LoRA, convert it for llama.cpp, then run base and adapter greedily on held-out
seeds. Interrupted, it resumes: finished stages are kept, and half-finished evaluations resume
example by example. Wiring only: the suites are checked here, where programs and optimizers meet.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from typer.core import TyperGroup

from rlmkit.cli.common import console, exit_on_error, exit_on_sigterm
from rlmkit.errors import UserError


def parse_plan(text: str, *, length: int, n: int):
    """``suite[:length[:n]]`` -> a SuitePlan (the suite is checked against the registry)."""
    from optimizers.selftrain import SuitePlan

    suite, *rest = text.split(":")
    check_suite(suite)
    try:
        values = [int(part) for part in rest]
    except ValueError:
        raise UserError(f"{text!r}: write suite, suite:length or suite:length:n") from None
    return SuitePlan(suite=suite, length=(values + [length])[0], n=(values[1:] + [n])[0])


def self_train_command(
    suites: Annotated[
        list[str] | None, typer.Argument(help="Suites to sample and train on: suite[:length[:n]].")
    ] = None,
    out: Annotated[Path, typer.Option("--out", help="Work folder: every stage's output.")] = Path(
        "runs/self-train"
    ),
    recipe_file: Annotated[
        Path | None,
        typer.Option(
            "--recipe",
            help="A recipe file (TOML or JSON, the fields of optimizers.selftrain.Recipe) in place of "
            "the suites and the options below.",
        ),
    ] = None,
    archive: Annotated[
        Path | None, typer.Option("--archive", help="Also pack each finished stage here (small; commit it).")
    ] = None,
    lm: Annotated[
        str, typer.Option("--lm", help="The model sampled and trained ('local': the embedded one).")
    ] = "local",
    held_out: Annotated[
        list[str] | None,
        typer.Option(
            "--held-out", help="Suites measured but not trained on: suite[:length[:n]] (repeatable)."
        ),
    ] = None,
    n: Annotated[int, typer.Option("--n", help="Training examples per suite (seeds 0..n-1).")] = 16,
    length: Annotated[
        int, typer.Option("--length", help="Context characters, where a suite names none.")
    ] = 20_000,
    samples: Annotated[int, typer.Option("--samples", min=1, help="Runs per training example.")] = 4,
    temperature: Annotated[float, typer.Option("--temperature", help="Sampling temperature.")] = 0.8,
    hint: Annotated[
        bool,
        typer.Option(
            "--hint",
            help="Sample with the gold answer in each training question (kept only "
            "if the run then printed it; trained on without the hint).",
        ),
    ] = False,
    per_turn: Annotated[
        bool,
        typer.Option("--per-turn", help="Compile with the per-turn filter (rlmkit compile sft --per-turn)."),
    ] = False,
    test_n: Annotated[int, typer.Option("--test-n", help="Held-out examples per trained suite.")] = 30,
    confirm_seed: Annotated[
        list[int] | None,
        typer.Option(
            "--confirm-seed",
            help="Measure the trained suites again on this held-out generator seed (repeatable): "
            "fresh examples, for a change decided after the first held-out runs were read.",
        ),
    ] = None,
    max_iterations: Annotated[int, typer.Option("--max-iterations", help="Root turns per run.")] = 8,
    workers: Annotated[int, typer.Option("--workers", help="Runs at once.")] = 4,
    max_steps: Annotated[int, typer.Option("--max-steps", help="Cap on optimizer steps.")] = 64,
    lr: Annotated[float, typer.Option("--lr", help="Learning rate.")] = 1e-4,
    lora_rank: Annotated[int, typer.Option("--lora-rank", help="LoRA rank.")] = 8,
    precision: Annotated[str, typer.Option("--precision", help="auto, bf16 or fp32.")] = "auto",
    dpo: Annotated[
        bool,
        typer.Option(
            "--dpo", help="After SFT, go on training the SFT adapter with DPO on the compiled pairs."
        ),
    ] = False,
    backend: Annotated[
        str, typer.Option("--backend", help="Training backend: trl-sft (CPU or CUDA, whichever torch sees).")
    ] = "trl-sft",
    stages: Annotated[
        str | None,
        typer.Option(
            "--stages",
            help="Only these stages (comma-separated): a stage's name, or the start of several names "
            "(sample, eval).",
        ),
    ] = None,
    close_sampling: Annotated[
        bool,
        typer.Option(
            "--close-sampling",
            help="First finish every sampling stage not finished with the runs it has (recorded as "
            "closed early), so the dataset stage can read them; then run the stages chosen.",
        ),
    ] = False,
) -> None:
    """Train a model on its own good runs; measure it.

    Samples runs on training seeds, keeps the good ones (compile sft), trains a LoRA, and runs the
    model with and without it on held-out seeds, paired."""
    from optimizers.selftrain import StageStore, earlier_round
    from optimizers.selftrain.checks import check_architecture, check_backend, check_room
    from optimizers.selftrain.pipeline import SelfTrain

    exit_on_sigterm()  # a stopped run stops the stage it runs (an evaluation and its server) too
    with exit_on_error():
        # Everything that can be wrong is found here, before an hour of sampling.
        if recipe_file is not None:
            if suites:
                raise UserError("give the suites in the recipe file or on the command line, not both")
            recipe = read_recipe(recipe_file)
        elif not suites:
            raise UserError("name the suites to train on (suite[:length[:n]]), or give --recipe FILE")
        else:
            recipe = make_recipe(
                lm=lm,
                train=tuple(parse_plan(s, length=length, n=n) for s in suites),
                held_out=tuple(parse_plan(s, length=length, n=10) for s in held_out or []),
                samples=samples,
                temperature=temperature,
                hint=hint,
                per_turn=per_turn,
                max_iterations=max_iterations,
                workers=workers,
                backend=backend,
                max_steps=max_steps,
                lr=lr,
                lora_rank=lora_rank,
                precision=precision,
                test_n=test_n,
                confirm_seeds=tuple(confirm_seed or ()),
                dpo=dpo,
            )
        check_lengths(recipe)
        if recipe.sample_adapter:
            earlier_round.check_adapter(recipe.sample_adapter)
        for spec in recipe.runs_from:
            earlier_round.check_runs(spec)
        base = base_gguf(recipe.lm)
        check_architecture(base)
        # the log names stages in brackets ("[train] ..."): text, not rich markup
        run = SelfTrain(
            recipe, StageStore(out, archive), base, log=lambda line: console.print(line, markup=False)
        )
        only = stage_filter(stages, [name for name, _, _ in run.stages()])
        if close_sampling:
            run.close_sampling()
        if run.will_run("train", only):  # the train extra and the room matter to training alone
            check_backend(recipe.backend)
            check_room(base, out)
        run.run(only=only)
        Console().print(report_table(run.comparison()))


def stage_filter(stages: str | None, names: list[str]) -> Callable[[str], bool]:
    """The stages ``--stages`` chooses among ``names``: each comma-separated word selects the stage
    of that name, or, where none has it, every stage whose name starts with it (``sample`` is each
    sampling stage, ``eval`` each measurement). So ``train`` is SFT alone, not ``train-dpo`` too.
    A word that selects nothing is refused before any stage runs."""
    if not stages:
        return lambda name: True
    chosen: set[str] = set()
    for word in (w.strip() for w in stages.split(",") if w.strip()):
        matched = [word] if word in names else [n for n in names if n.startswith(word)]
        if not matched:
            raise UserError(f"--stages {word!r} names no stage of this recipe: {', '.join(names)}")
        chosen.update(matched)
    return chosen.__contains__


def read_recipe(path: Path):
    """A Recipe from a TOML or JSON file, checked like one made from flags."""
    import json
    import tomllib

    if not path.is_file():
        raise UserError(f"no recipe file at {path}")
    try:
        fields = tomllib.loads(path.read_text()) if path.suffix == ".toml" else json.loads(path.read_text())
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise UserError(
            f"{path} is not valid {'TOML' if path.suffix == '.toml' else 'JSON'}: {exc}"
        ) from None
    for plans in ("train", "held_out"):
        for plan in fields.get(plans, []):
            check_suite(plan.get("suite") if isinstance(plan, dict) else None)
    return make_recipe(**fields)


def check_lengths(recipe) -> None:
    """Every plan's suite can build an example at its length (source needs whole files, a long
    conversation its turns): found now, not when its stage starts hours into the recipe."""
    from programs.tasks import generate
    from programs.tasks.base import TaskError

    for plans, seed in ((recipe.train, recipe.sample_seed), (recipe.held_out, recipe.test_seed)):
        for plan in plans:
            try:
                generate(plan.suite, n=1, length=plan.length, seed=seed)
            except TaskError as exc:
                raise UserError(f"{plan.label}: {exc}") from None


def check_suite(suite: str | None) -> None:
    from programs.tasks import FAMILIES

    if suite not in FAMILIES:
        raise UserError(f"unknown suite {suite!r}; choose from {', '.join(FAMILIES)}")


def make_recipe(**fields):
    """A Recipe, or the first thing wrong with it as a UserError (one line, no pydantic dump)."""
    from pydantic import ValidationError

    from optimizers.selftrain import Recipe

    try:
        return Recipe(**fields)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        raise UserError(
            f"{where + ': ' if where else ''}{error['msg'].removeprefix('Value error, ')}"
        ) from None


def base_gguf(lm: str) -> Path:
    """The GGUF file the recipe trains: the embedded model's, or a GGUF path given as --lm."""
    if lm == "local":
        from rlmkit.local import ensure_model

        return ensure_model()
    path = Path(lm)
    if path.suffix != ".gguf" or not path.is_file():
        raise UserError("--lm takes 'local' (the embedded model) or a path to a GGUF model file")
    return path


def report_table(rows: list[dict]) -> Table:
    from optimizers.selftrain.paired import COLUMNS, report_cells

    table = Table(title="self-training: base vs adapter on held-out seeds (greedy, paired)")
    for column in COLUMNS:
        table.add_column(column)
    for row in rows:
        table.add_row(*report_cells(row))
    if not rows:
        table.caption = "no suite has both arms measured yet"
    return table


class _RunByDefault(TyperGroup):
    """``rlmkit self-train SUITE...`` runs a round as it always did; a verb's name first (``ship``,
    ``hold-back``, ``read-test``) runs that verb instead."""

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in ("--help", "-h")):
            args = ["run", *args]
        return super().parse_args(ctx, args)


def register(app: typer.Typer) -> None:
    from optimizers.cli import release

    group = typer.Typer(
        cls=_RunByDefault,
        help="Self-train a model; ship an adapter; read the sealed test.",
    )
    group.command("run")(self_train_command)
    group.command("ship")(release.ship_command)
    group.command("hold-back")(release.hold_back_command)
    group.command("read-test")(release.read_test_command)
    app.add_typer(group, name="self-train")

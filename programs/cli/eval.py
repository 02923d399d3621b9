"""``rlmkit eval SUITE``: run a program over generated examples, with live progress and a results table.

    rlmkit eval aggregation --n 20 --length 200000 --lm openai/gpt-4o-mini --out runs/agg
    rlmkit eval needle --knob kind=uuids --lm local --baseline
    rlmkit eval needle --n 20 --samples 4 --temperature 0.8 --lm local   # 4 distinct runs per example
    rlmkit eval needle --n 500 --lm openai/gpt-4o-mini --ray auto   # examples as tasks on a Ray cluster

Re-running with the same arguments resumes from ``--out``: finished examples are not run again.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from programs.cli.eval_plan import EvalPlan, plan
from programs.cli.eval_progress import LiveCounts, ProgressLines
from programs.tasks import FAMILIES  # plain data and generators: cheap to import for --help
from rlmkit import events as ev
from rlmkit.cli.common import EMBEDDED_FLAGS, exit_on_error, lm_from_flag
from rlmkit.cli.common import console as err


def eval_command(
    suite: str = typer.Argument(..., help=f"One of: {', '.join(FAMILIES)}."),
    n: int = typer.Option(10, "--n", help="Number of examples."),
    length: int = typer.Option(100_000, "--length", help="Context length of each example, in characters."),
    seed: int = typer.Option(0, "--seed", help="Generator seed: the same seed gives the same examples."),
    knob: Annotated[
        list[str] | None,
        typer.Option("--knob", help="Suite knob as name=value (repeatable), e.g. labelled=true."),
    ] = None,
    lm: str = typer.Option(
        "local", "--lm", help="Root model: a litellm model string, or 'local' (the embedded model)."
    ),
    api_base: str = typer.Option(
        None, "--api-base", help="OpenAI-compatible server URL for --lm and --sub-lm."
    ),
    adapter: str = typer.Option(
        None,
        "--adapter",
        help="With --lm local: a GGUF LoRA adapter applied to the embedded model, 'none' for the "
        "base model, 'shipped' for the adapter this build ships (default: $RLMKIT_LOCAL_ADAPTER, "
        "else the shipped adapter if it passed its gate, else none).",
    ),
    local_threads: int = typer.Option(
        None,
        "--local-threads",
        min=1,
        help="With --lm local: serve the model from this command's own server with this many llama.cpp "
        "threads and --workers slots (default: the machine's shared server).",
    ),
    sub_lm: str = typer.Option(None, "--sub-lm", help="Model for sub-calls (default: the root model)."),
    program: str = typer.Option(
        "rlm",
        "--program",
        help="rlm (the suite's program: its instructions know the suite), plain (the suite's signature: "
        "field names, types and output descriptions, with neutral instructions, no strategy, no typed "
        "sub-calls), facts_then_answer (multihop), tally_then_answer (aggregation).",
    ),
    moves: str = typer.Option(
        "count",
        "--moves",
        help="The moves the system prompt lists: count (the default; ends on a counted result) or "
        "read (every move prints; the run ends on a value copied from the output).",
    ),
    max_tokens: int = typer.Option(
        None,
        "--max-tokens",
        min=1,
        help="Tokens each run may spend, sub-calls included: with --max-iterations, the bound that ends "
        "a run, the same on a busy machine as on a quiet one.",
    ),
    max_seconds: float = typer.Option(
        None,
        "--max-seconds",
        min=1.0,
        help="Wall-time budget of each run, sub-calls included: a run past it stops and scores 0. Set it "
        "far above a normal run (a fault guard): a verdict should rest on turns and tokens.",
    ),
    hint: bool = typer.Option(
        False,
        "--hint",
        help="Sampling only (seeds below 1000): put the gold answer in each question as a hint. "
        "rlmkit compile keeps such a run only if its output showed the gold before it answered, and "
        "writes it without the hint.",
    ),
    hold_unread_answers: bool = typer.Option(
        False,
        "--hold-unread-answers",
        help="Hold back an answer given in the same turn as code that printed output, until the model "
        "has read that output and answers again (small models otherwise answer before reading).",
    ),
    max_depth: int = typer.Option(1, "--max-depth", help="Recursion depth for rlm_query sub-calls."),
    max_iterations: int = typer.Option(20, "--max-iterations", help="Root turns per example."),
    workers: int = typer.Option(4, "--workers", help="Examples run concurrently."),
    out: str = typer.Option(None, "--out", help="Run directory (default runs/eval-SUITE-LENGTH-sSEED)."),
    baseline: bool = typer.Option(
        False, "--baseline", help="Also run the plain LM on the context cut to its window."
    ),
    plain: bool = typer.Option(
        False,
        "--plain",
        help="Also run the plain RLM beside the program. It keeps the suite's signature (field names, "
        "types and the output descriptions the prompt shows) and drops the suite's instructions, its "
        "strategy and its typed sub-calls.",
    ),
    window_tokens: int = typer.Option(
        None,
        "--window-tokens",
        help="The baseline's context window, in tokens (default: the model's own, from litellm's "
        "model map or the embedded model's server).",
    ),
    retry_failed: bool = typer.Option(
        False, "--retry-failed", help="Run failed examples again when resuming."
    ),
    samples: int = typer.Option(
        1,
        "--samples",
        min=1,
        help="Distinct runs per example (rollout ids 0..K-1), e.g. for compile sft/rl/dpo.",
    ),
    temperature: float = typer.Option(
        None,
        "--temperature",
        min=0.0,
        help="Sampling temperature of --lm and --sub-lm (default: the model's).",
    ),
    lm_cache: str = typer.Option(
        None,
        "--lm-cache",
        metavar="DIR|off",
        help=(
            "Where the models' replies are cached: a directory, or 'off' (default: $RLMKIT_CACHE_DIR, "
            "else ~/.cache/rlmkit/lm). A measurement that must not replay replies another run cached "
            "(an arm compared with another on this machine) gets a directory of its own."
        ),
    ),
    branch_from: str = typer.Option(
        None,
        "--branch-from",
        metavar="DIR",
        help="Continue the runs of an earlier `rlmkit eval` folder of these same arguments that scored "
        "below --branch-below: each one's turns before its last are played back, and the model writes "
        "the last turn again, --samples times (for preference pairs after one prefix). Give it that "
        "folder's --lm-cache.",
    ),
    branch_below: float = typer.Option(
        1.0, "--branch-below", min=0.0, help="With --branch-from: continue runs that scored below this."
    ),
    ray: str = typer.Option(
        None,
        "--ray",
        metavar="ADDRESS",
        help=(
            "Run examples as Ray tasks: 'local' starts a Ray instance on this machine for the call; 'auto', "
            "host:port or ray://host:10001 joins a cluster; one example per cluster CPU at a time "
            "(--workers is for threads). Needs the cluster extra."
        ),
    ),
) -> None:
    """Evaluate a program on a generated task suite.

    Prints the mean score (95% CI), cost, tokens and failures.
    """
    with exit_on_error():
        _run(plan(**locals()))


def _run(p: EvalPlan) -> None:
    """One evaluation, as its plan says."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from programs.evaluate import evaluate, evaluate_plan
    from programs.registry import baseline_for, build_program
    from programs.tasks import generate, parse_knobs
    from rlmkit.budget import DEFAULT_MAX_CALLS, Budget
    from rlmkit.prompting import Display

    # Everything the command line can get wrong fails here, before any model call.
    knobs = parse_knobs(p.suite, list(p.knob))
    examples = generate(p.suite, n=p.n, length=p.length, seed=p.seed, **knobs)
    if p.hint:
        from programs.hints import hinted

        examples = [hinted(example) for example in examples]  # a held-out seed is refused here
    sampling = {"temperature": p.temperature} if p.temperature is not None else {}
    if p.adapter is not None:
        sampling["adapter"] = p.adapter
    if p.lm_cache is not None:
        sampling["cache"] = False if p.lm_cache.strip().lower() == "off" else Path(p.lm_cache).expanduser()
    if p.local_threads:
        from rlmkit.local import LocalServerConfig

        sampling.update(config=LocalServerConfig(threads=p.local_threads, parallel=p.workers), private=True)
    root = lm_from_flag(p.lm, p.api_base, **sampling)
    sub = lm_from_flag(p.sub_lm, p.api_base, **sampling) if p.sub_lm else None

    display = Display(moves=p.moves)  # an unknown set of moves fails here
    # the default call cap stays; the token bound and the time guard are added to it
    limits = {"max_tokens": p.max_tokens, "max_seconds": p.max_seconds}
    budget = {"budget": Budget(max_calls=DEFAULT_MAX_CALLS, **limits)} if any(limits.values()) else {}

    def build(name: str):
        return build_program(
            name, p.suite, lm=root, sub_lm=sub, max_depth=p.max_depth, max_iterations=p.max_iterations,
            display=display, hold_unread_answers=p.hold_unread_answers, **budget,
        )  # fmt: skip

    factory, plain_factory = functools.partial(build, p.program), functools.partial(build, "plain")

    factory()  # a bad program/suite pairing or knob fails now, not in every worker
    # the baseline's window (the model's own unless given) is known now, or its error is raised now
    baseline_program = baseline_for(p.suite, lm=root, window_tokens=p.window_tokens) if p.baseline else False
    config = {
        "suite": p.suite,
        "length": p.length,
        "seed": p.seed,
        "knobs": knobs,
        "program": p.program,
        "lm": p.lm,
        "api_base": p.api_base,
        "sub_lm": p.sub_lm,
        "max_depth": p.max_depth,
        "max_iterations": p.max_iterations,
        "window_tokens": baseline_program.window_tokens if baseline_program else p.window_tokens,
    }
    if p.temperature is not None:  # only when set: older run folders keep their config hash
        config["temperature"] = p.temperature
    if p.moves != Display.moves:  # likewise
        config["moves"] = p.moves
    if p.hold_unread_answers:
        config["hold_unread_answers"] = True
    if p.hint:
        config["hint"] = True
    if p.max_seconds:
        config["max_seconds"] = p.max_seconds
    if p.max_tokens:
        config["max_tokens"] = p.max_tokens
    if p.lm in EMBEDDED_FLAGS:
        config.update(_adapter_config(p.adapter))
    branching = None
    if p.branch_from:
        from programs.branching import BranchPlan
        from rlmkit.run.replay import ReplayedPrefix

        branching = BranchPlan.read(p.branch_from, examples, config, below=p.branch_below, samples=p.samples)
        if not branching.origins:  # every run right, or answered in one turn: a result, not an error
            err.print(
                f"no run of {p.branch_from} scored below {p.branch_below} after two turns or more: "
                "nothing to continue"
            )
            return
        root = ReplayedPrefix(root, branching.branches())  # build() reads root and sub when called
        sub = ReplayedPrefix(sub, branching.branches()) if sub else None
        config = branching.config
    default_out = Path(f"{p.branch_from.rstrip('/')}-continued") if p.branch_from else None
    out = Path(p.out) if p.out else default_out or Path("runs") / f"eval-{p.suite}-{p.length}-s{p.seed}"
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("correct {task.fields[correct]}"),
        TextColumn("${task.fields[cost]:.4f}"),
        TextColumn("running {task.fields[running]}, model calls {task.fields[calls]}"),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=err) as progress:
        what = f"{len(branching.origins)} runs continued" if branching else f"x{p.n}"
        task = progress.add_task(
            f"{p.suite} {what}" + (f" x{p.samples} samples" if p.samples > 1 else ""),
            total=None,
            correct=0,
            cost=0.0,
            running=0,
            calls=0,
        )
        stop_live = ev.instrument(lambda start: LiveCounts(progress, task))  # runs in this process's threads

        # A bar redraws only on a terminal: written to a log (a run in the background, CI), each
        # finished run is a line with the time left instead.
        lines = None if err.is_terminal else ProgressLines()

        def on_start(todo: int, done: int) -> None:
            progress.update(task, total=todo + done, completed=done)
            if lines is not None:
                lines.start(todo)
            if done:
                progress.console.print(f"resuming {out}: {done} finished run(s) kept")

        def on_result(row) -> None:
            fields = progress.tasks[task].fields
            right = row.program == "program" and row.score >= 0.999  # plain and baseline have their own rows
            progress.update(
                task, advance=1, correct=fields["correct"] + right, cost=fields["cost"] + row.cost
            )
            if lines is not None:
                state = progress.tasks[task]
                progress.console.print(lines.line(row, int(state.completed), int(state.total or 0)))
            if row.status == "failed":
                progress.console.print(
                    f"[yellow]{row.id}#{row.sample} ({row.program}) failed: {row.failure}[/yellow] "
                    f"{escape((row.error or '')[:160])}"
                )

        runs = (
            functools.partial(evaluate_plan, factory, branching.plan, runner=branching.runner())
            if branching
            else functools.partial(evaluate, factory, examples, samples=p.samples)
        )
        try:
            result = runs(
                workers=p.workers,
                out_dir=out,
                config=config,
                baseline=baseline_program,
                plain=plain_factory if p.plain else False,
                retry_failed=p.retry_failed,
                on_result=on_result,
                on_start=on_start,
                ray=p.ray,
            )
        finally:
            stop_live()
    Console(width=max(Console().width, 130)).print(
        result.table(title=f"rlmkit eval {p.suite} (n={p.n}, length={p.length:,}, seed={p.seed})")
    )
    summary = {
        "config": config,
        "samples": p.samples,
        "summary": result.summary(),
        "plain": result.plain.summary() if result.plain else None,
        "baseline": result.baseline.summary() if result.baseline else None,
    }
    (Path(out) / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    totals = result.totals()
    if (replayed := totals["cached_calls"]) and not branching:  # a continuation's played turns count too
        err.print(
            f"[yellow]{replayed} of {totals['calls']} model calls were answered from the LM cache "
            f"({getattr(root, 'cache_dir', None)}): replies cached before, not measured now. To measure "
            "afresh, give this run a cache of its own (--lm-cache DIR) or none (--lm-cache off).[/yellow]"
        )
    print(f"results and trajectories: {out}  (view them: rlmkit view {out}/trajectories)")


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_command)


def _adapter_config(adapter: str | None) -> dict[str, str]:
    """The embedded model's adapter as part of a run folder's identity: by name and content, not
    path, so a moved or renamed copy of the same adapter resumes its runs and a changed file does
    not. Nothing is added when no adapter is given or applied (older folders keep their hash)."""
    from rlmkit.local.adapter import DEFAULT, resolve_adapter, served_alias

    applied = resolve_adapter(DEFAULT if adapter is None else adapter)
    if applied is None:
        return {} if adapter is None else {"adapter": "none"}
    return {"adapter": served_alias(applied)}

"""``rlmkit demo``: the first thing to run. No key, no network: the embedded model answers a
counting question over ~200,000 characters of records by writing code in the REPL.

It shows each turn live (the code, its output, sub-calls, tokens, cost), then the answer,
the gold answer and the score, and where the trajectory was written. The task is the
labelled aggregation variant's count question, on a seed no tuning ever used (tuning uses
seeds below 1000). The program is the plain ``rlmkit.RLM("context, question -> answer: str")``:
with the embedded model as root it runs the program shipped for that model
(``rlmkit/local/tuned_program.json``); the demo says which program and seed it used.
"""

from __future__ import annotations

import time
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.syntax import Syntax

from rlmkit import events as ev
from rlmkit.cli.common import EMBEDDED_FLAGS, exit_on_error, lm_from_flag

console = Console(stderr=False, soft_wrap=True)

# Tuning (benchmarks/tune_embedded.py) uses seeds below 1000 and the held-out evaluation
# (benchmarks/local_quality.py) 1000 up; the demo's tasks come from further up still.
DEMO_SEED = 2000
# REPL output shown to the model per turn: small, because every character is prompt the CPU must read
DEMO_DISPLAY_OUTPUT_CHARS = 2_000

NEXT_STEPS = """What to try next:
  - a real provider:  rlmkit eval aggregation --n 10 --length 1000000 --lm openai/gpt-4o-mini --baseline
  - other task suites: needle, multi_needle, pairs, multihop, codeqa (rlmkit eval --help)
  - look at the run:  rlmkit view {trajectory}
  - tune and train:   rlmkit optimize aggregation --lm ... ; rlmkit compile ...; rlmkit train ..."""


class TurnPrinter:
    """Prints the run as it happens, from its events (``rlmkit.events``): each turn as it
    starts, each cell's code when the model has written it, its output when it has run, and
    the turn's tokens, sub-calls and cost when it ends."""

    def __init__(self, started: float):
        self.started = started
        self.cost = 0.0

    def __call__(self, event: ev.Event) -> None:
        if event.depth:  # child runs (rlm_query) show up as sub-calls of their cell
            return
        kind = type(event)
        if kind is ev.TurnStarted:
            console.print(f"[dim]turn {event.turn.index + 1}: asking the model ...[/dim]")
        elif kind is ev.CellStarted:
            console.print(
                Panel(
                    Syntax(event.block.code, "python", theme="ansi_dark", word_wrap=True),
                    title="code",
                    title_align="left",
                )
            )
        elif kind is ev.CellFinished:
            output = (event.block.stdout or "") + (event.block.error or "")
            if output.strip():
                console.print(Panel(escape(output.strip()[-800:]), title="output", title_align="left"))
        elif kind is ev.TurnFinished:
            self.show(event.turn)

    def show(self, turn) -> None:
        usage = turn.usage
        self.cost += usage.cost + sum(c.usage.cost for b in turn.blocks for c in b.subcalls)
        subcalls = sum(len(block.subcalls) for block in turn.blocks)
        head = (
            f"turn {turn.index + 1}  {turn.duration_s:.0f}s  "
            f"tokens {usage.prompt_tokens:,} in / {usage.completion_tokens:,} out  "
            f"sub-calls {subcalls}  cost ${self.cost:.4f}  elapsed {time.monotonic() - self.started:.0f}s"
        )
        console.rule(escape(head), align="left")
        if not turn.blocks:
            console.print(escape(turn.reply[:600]))


def demo(
    length: int = typer.Option(200_000, "--length", help="Characters of records in the context."),
    seed: int = typer.Option(
        DEMO_SEED, "--seed", help="Which generated task (same seed, same task; tuning used seeds < 1000)."
    ),
    lm: str = typer.Option(None, "--lm", help="A litellm model string; default: the embedded local model."),
    api_base: str = typer.Option(None, "--api-base", help="OpenAI-compatible server URL for --lm."),
    max_iterations: int = typer.Option(6, "--max-iterations", help="Root turns before the answer is forced."),
    out: str = typer.Option(None, "--out", help="Where the trajectory is written (default runs/demo)."),
) -> None:
    """Run a Recursive Language Model on a generated counting task, live, with the embedded model."""
    with exit_on_error():
        _run(length, seed, lm, api_base, max_iterations, Path(out or "runs/demo"))


def _run(
    length: int, seed: int, lm: str | None, api_base: str | None, max_iterations: int, out: Path
) -> None:
    import rlmkit
    from programs.tasks import generate, score
    from rlmkit.prompting import Display

    example = generate("aggregation", n=1, length=length, seed=seed, labelled=True, question="count")[0]
    console.print(
        f"[bold]rlmkit demo[/bold]: {example.meta['records']:,} records, {len(example.context):,} "
        f"characters; the model sees only a preview and reads the rest with code."
    )
    console.print(f"question: {escape(example.inputs['question'])}")
    held_out = "never used in tuning" if seed >= 1000 else "a TRAINING seed: tuning used seeds < 1000"
    console.print(f"task: aggregation, seed {seed} ({held_out}; --seed N: another), {length:,} characters")
    if lm in EMBEDDED_FLAGS:
        console.print("starting the embedded model (Qwen2.5-Coder-1.5B, CPU) ...")
    # a small model writes short turns; a provider's model keeps its own max_tokens
    short = {"max_tokens": 400} if lm in EMBEDDED_FLAGS else {}
    model = lm_from_flag(lm, api_base, temperature=0.0, **short)
    stream_dir = out / f"run-{time.strftime('%Y%m%d-%H%M%S')}"
    rlm = rlmkit.RLM(
        "context, question -> answer: str",
        lm=model,
        max_iterations=max_iterations,
        log_dir=stream_dir,
        display=Display(max_output_chars=DEMO_DISPLAY_OUTPUT_CHARS),
    )
    console.print(f"program: {_program_line(model)}")
    started = time.monotonic()
    task = {"suite": "aggregation", "example_id": example.id, "seed": seed, "length": length, "demo": True}
    console.print(
        f"[dim]up to {max_iterations} turns; each turn's code appears when the model has written it, "
        "its output when the REPL has run it (on 2 CPU cores a turn can take a minute)[/dim]"
    )
    with ev.listen(TurnPrinter(started)):
        try:
            prediction = rlm(**example.inputs, _task=task)
            answer, trajectory = prediction.answer, prediction.trajectory
        except rlmkit.errors.RunError as exc:  # out of turns or budget: still show and keep the run
            answer, trajectory = None, exc.trajectory
            console.print(f"[yellow]the run ended without an answer: {escape(str(exc))}[/yellow]")
    wall = time.monotonic() - started
    value = score(example, answer)
    path = _rewrite_with_score(stream_dir, trajectory, value)
    colour = "green" if value >= 0.999 else "yellow" if value > 0 else "red"
    console.print(
        f"\nanswer: [bold]{escape(str(answer))}[/bold]   gold: [bold]{example.gold}[/bold]   "
        f"score: [{colour}]{value:.3f}[/{colour}] (OOLONG: 0.75^|error|)   wall: {wall:.0f}s"
    )
    console.print(f"trajectory: {path}")
    console.print(NEXT_STEPS.format(trajectory=path))


def _program_line(model) -> str:
    """Which program the run uses: the model's shipped one (with its provenance) or the default."""
    preset = getattr(model, "preset", None)
    if not preset:
        return "the default prompt (no instructions, no demos)"
    origin = preset.get("provenance", {})
    return (
        f"the program shipped for this model ({len(preset.get('demos', []))} demos, knobs "
        f"{preset.get('knobs', {})}), tuned {origin.get('date', '?')} on training seeds: "
        f"{origin.get('command', '?')}"
    )


def _rewrite_with_score(stream_dir: Path, trajectory, value: float) -> Path | None:
    """The streamed log lacks the score (known only now): write the run once more, scored."""
    if trajectory is None:
        return None
    from rlmkit.trajectory import TrajectoryLog

    trajectory.score = value
    log = TrajectoryLog(stream_dir)
    log.path(trajectory.meta.run_id).unlink(missing_ok=True)
    return log.write(trajectory)


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)

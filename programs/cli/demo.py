"""``rlmkit demo``: the first thing to run. No key, no network: the embedded model finds one
value hidden in 200,000 characters of prose (a needle in a haystack, about 3x the model's
window) by writing code in the REPL.

It shows each turn live (the code, its output, the sub-calls, tokens, cost), then the
answer, the gold answer and the score, what a plain call would have faced, and how often
the demo answers right (``benchmarks/results/demo_accuracy.json``). The task and program
are ``programs/demo_task.py``: the plain ``rlmkit.RLM("context, question -> answer: str")``,
nothing in any prompt written for the task; the default seed is a dev seed, never trained on
(``programs/tasks/splits.py``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.syntax import Syntax

from programs.demo_task import (
    DEMO_LENGTH,
    DEMO_MAX_ITERATIONS,
    DEMO_SEED,
    DEMO_SUITE,
    EMBEDDED_MAX_TOKENS,
    demo_example,
    demo_rlm,
    window_multiple,
)
from programs.tasks import FAMILIES  # plain names: cheap to import
from programs.tasks.splits import split_for
from rlmkit import events as ev
from rlmkit.cli.common import EMBEDDED_FLAGS, exit_on_error, lm_from_flag

console = Console(stderr=False, soft_wrap=True)

ACCURACY_FILE = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "demo_accuracy.json"

NEXT_STEPS = """What to try next:
  - a real provider:  rlmkit eval needle --n 10 --length 1000000 --lm openai/gpt-4o-mini
  - other task suites: {suites} (rlmkit eval --help)
  - look at the run:  rlmkit view {trajectory}
  - tune and train:   rlmkit optimize needle ; rlmkit compile ... ; rlmkit train --list"""


class TurnPrinter:
    """Prints the run as it happens, from its events (``rlmkit.events``): each turn as it
    starts, each cell's code when the model has written it, each sub-call when it returns,
    the cell's output when it has run, and the turn's tokens, sub-calls and cost when it ends."""

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
                ),
                soft_wrap=False,  # the console's soft wrap would crop long lines at the panel's edge
            )
        elif kind is ev.SubcallFinished:
            node = event.node
            said = node.error or node.reply
            console.print(
                f"[cyan]{escape(node.name)}[/cyan] ({node.duration_s:.0f}s): "
                f"{escape(_one_line(node.prompt, 80))} [dim]->[/dim] {escape(_one_line(said, 120))}"
            )
        elif kind is ev.CellFinished:
            output = (event.block.stdout or "") + (event.block.error or "")
            if output.strip():
                panel = Panel(escape(output.strip()[-800:]), title="output", title_align="left")
                console.print(panel, soft_wrap=False)
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
    seed: int = typer.Option(
        DEMO_SEED, "--seed", help="Which generated task (same seed, same task; training used seeds < 1000)."
    ),
    length: int = typer.Option(DEMO_LENGTH, "--length", help="Characters of prose in the context."),
    lm: str = typer.Option(None, "--lm", help="A litellm model string; default: the embedded model."),
    api_base: str = typer.Option(None, "--api-base", help="OpenAI-compatible server URL for --lm."),
    max_iterations: int = typer.Option(
        DEMO_MAX_ITERATIONS, "--max-iterations", help="Root turns before the answer is forced."
    ),
    out: str = typer.Option(None, "--out", help="Where the trajectory is written (default runs/demo)."),
) -> None:
    """Run an RLM live on a generated task; start here.

    No key and no network: the embedded model answers unless --lm names another.
    """
    with exit_on_error():
        _run(length, seed, lm, api_base, max_iterations, Path(out or "runs/demo"))


def _run(
    length: int, seed: int, lm: str | None, api_base: str | None, max_iterations: int, out: Path
) -> None:
    import rlmkit
    from programs.tasks import score

    example = demo_example(seed, length)
    console.print(
        f"[bold]rlmkit demo[/bold]: one value hidden in {len(example.context):,} characters of prose "
        "(with two decoys for other keys); the model sees only a preview and reads the rest with code."
    )
    console.print(f"question: {escape(example.inputs['question'])}")
    note = _seed_note(seed)
    console.print(f"task: {DEMO_SUITE}, seed {seed} ({note}; --seed N: another), {length:,} characters")
    embedded = lm in EMBEDDED_FLAGS
    if embedded:
        console.print("starting the embedded model (Qwen2.5-Coder-1.5B, CPU) ...")
    short = {"max_tokens": EMBEDDED_MAX_TOKENS} if embedded else {}
    # no cache: a first run is a real run, not a replay of an earlier one
    model = lm_from_flag(lm, api_base, temperature=0.0, cache=False, **short)
    console.print(_plain_call_line(len(example.context), model))
    stream_dir = out / f"run-{time.strftime('%Y%m%d-%H%M%S')}"
    rlm = demo_rlm(model, max_iterations=max_iterations, log_dir=stream_dir)
    console.print(f"program: {_program_line(model)}")
    started = time.monotonic()
    task = {"suite": DEMO_SUITE, "example_id": example.id, "seed": seed, "length": length, "demo": True}
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
    value = score(example, answer) if answer is not None else 0.0
    path = _rewrite_with_score(stream_dir, trajectory, value)
    colour = "green" if value >= 0.999 else "yellow" if value > 0 else "red"
    console.print(
        f"\nanswer: [bold]{escape(str(answer))}[/bold]   gold: [bold]{escape(str(example.gold))}[/bold]   "
        f"score: [{colour}]{value:.3f}[/{colour}] (RULER: the share of gold values in the answer)   "
        f"wall: {wall:.0f}s"
    )
    if embedded and (measured := _measured_accuracy()):
        console.print(measured)
    console.print(f"trajectory: {path}")
    others = ", ".join(name for name in FAMILIES if name != DEMO_SUITE)
    console.print(NEXT_STEPS.format(trajectory=path, suites=others))


def _one_line(text: str, limit: int) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _window_tokens(model) -> int | None:
    """The model's context window in tokens (the baseline's rule), or None when nobody knows it."""
    from programs.baseline import window_tokens_of
    from rlmkit.errors import UserError

    try:
        return window_tokens_of(model)
    except UserError:  # not in litellm's model map: say nothing rather than guess
        return None


def _plain_call_line(context_chars: int, model) -> str:
    """What a plain call would face: the context against the model's window."""
    window = _window_tokens(model)
    if not window:
        return f"the context is about {context_chars // 4:,} tokens; the model's window is not known"
    times = window_multiple(context_chars, window)
    verdict = "it cannot read it at once" if times > 1 else "it fits, so an RLM is not needed for it"
    return (
        f"a plain call would face about {context_chars // 4:,} tokens, {times:.1f}x the model's "
        f"{window:,}-token window: {verdict}"
    )


def _measured_accuracy() -> str | None:
    """The demo's accuracy on held-out seeds, when the checkout holds the measurement."""
    try:
        result = json.loads(ACCURACY_FILE.read_text())
        summary = result["summary"]
    except (OSError, ValueError, KeyError):
        return None
    seeds = [row["seed"] for row in result.get("rows", [])]
    span = f"seeds {min(seeds)}-{max(seeds)}" if seeds else "held-out seeds"
    served = f"LoRA adapter {result['adapter']}" if result.get("adapter") else "the base model alone"
    return (
        f"measured: this demo answers right on {summary['right']} of {summary['n']} held-out {span} "
        f"(mean score {summary['accuracy']:.2f}; {served}; {result.get('command', '')}, "
        f"{result.get('date', '')})"
    )


# What made the shipped program, and where its record is, as a reader of this checkout finds
# them: the record's own command names the script where it stood then and a scratch folder of
# the machine it ran on, which mean nothing here.
TUNING_SCRIPT = "scripts/tune_embedded.py"
TUNING_RECORD = "rlmkit/local/tuned_program.json"


def _program_line(model) -> str:
    """Which program the run uses: the model's shipped one (with where it came from) or the default."""
    preset = model.traits.preset
    if not preset:
        return "the default prompt (no instructions, no demos)"
    origin = preset.get("provenance", {})
    return (
        f"the program shipped for this model ({len(preset.get('demos', []))} demos, knobs "
        f"{preset.get('knobs', {})}), tuned {origin.get('date', '?')} on training seeds by "
        f"{TUNING_SCRIPT} (its command, trials and scores: {TUNING_RECORD})"
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


def _seed_note(seed: int) -> str:
    """What the seed's split means for a reader of the demo's answer."""
    split = split_for(seed)
    if split == "train":
        return "a TRAINING seed: the shipped adapter trained on seeds < 1000"
    return "a dev seed: never trained on" if split == "dev" else "a sealed test seed: never trained on"

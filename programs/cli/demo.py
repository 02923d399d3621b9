"""``rlmkit demo``: the first thing to run. No key, no network: the embedded model answers a
counting question over ~200,000 characters of records by writing code in the REPL.

It shows each turn live (the code, its output, sub-calls, tokens, cost), then the answer,
the gold answer and the score, and where the trajectory was written. The task is the
labelled aggregation variant: countable with a line of Python, so a 1.5B model on 2 CPU
cores finishes in minutes.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Self

import typer
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.syntax import Syntax

from rlmkit.cli.common import EMBEDDED_FLAGS, exit_on_error, lm_from_flag

console = Console(stderr=False, soft_wrap=True)

# Spelled out for a small model: where the data is, what one line looks like, the shape of the code.
# What the data looks like, nothing more: the answer's code is the model's job (the default
# prompt's generic moves teach how); a demo that hands over the code measures nothing.
DEMO_INSTRUCTIONS = """The records are in the REPL variable `context` (a str), one record per line:
'Date: Mar 14, 2023 || User: 48213 || Instance: <question text> || Label: <label>'."""
# REPL output shown to the model per turn: small, because every character is prompt the CPU must read
DEMO_DISPLAY_OUTPUT_CHARS = 2_000

NEXT_STEPS = """What to try next:
  - a real provider:  rlmkit eval aggregation --n 10 --length 1000000 --lm openai/gpt-4o-mini --baseline
  - other task suites: needle, multi_needle, pairs, multihop, codeqa (rlmkit eval --help)
  - look at the run:  rlmkit view {trajectory}
  - tune and train:   rlmkit optimize aggregation --lm ... ; rlmkit compile ...; rlmkit train ..."""


class TurnPrinter:
    """Tails the streaming trajectory log and prints each finished turn as it lands."""

    def __init__(self, log_dir: Path, started: float):
        self.log_dir, self.started = log_dir, started
        self.cost = 0.0
        self._seen = 0  # log lines already shown
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="rlmkit-demo-turns", daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._drain()

    def _watch(self) -> None:
        while not self._stop.wait(0.5):
            self._drain()

    def _drain(self) -> None:
        lines = [line for path in sorted(self.log_dir.glob("*.jsonl"))
                 for line in path.read_text(encoding="utf-8", errors="replace").splitlines()]
        for line in lines[self._seen:]:
            self._seen += 1
            try:
                record = json.loads(line)
            except ValueError:  # a line still being written: read it again next time
                self._seen -= 1
                return
            if record.get("event") == "turn":
                self.show(record["turn"])

    def show(self, turn: dict) -> None:
        usage = turn.get("usage", {})
        self.cost += usage.get("cost", 0.0)
        subcalls = sum(len(block.get("subcalls", [])) for block in turn.get("blocks", []))
        head = (f"turn {turn['index'] + 1}  {turn.get('duration_s', 0):.0f}s  "
                f"tokens {usage.get('prompt_tokens', 0):,} in / {usage.get('completion_tokens', 0):,} out  "
                f"sub-calls {subcalls}  cost ${self.cost:.4f}  elapsed {time.monotonic() - self.started:.0f}s")
        console.rule(escape(head), align="left")
        if not turn.get("blocks"):
            console.print(escape(turn.get("reply", "")[:600]))
        for number, block in enumerate(turn.get("blocks", []), 1):
            console.print(Panel(Syntax(block["code"], "python", theme="ansi_dark", word_wrap=True),
                                title=f"code, block {number}", title_align="left"))
            output = (block.get("stdout") or "") + (block.get("error") or "")
            if output.strip():
                console.print(Panel(escape(output.strip()[-800:]), title="output", title_align="left"))


def demo(
    length: int = typer.Option(200_000, "--length", help="Characters of records in the context."),
    seed: int = typer.Option(0, "--seed", help="Which generated task (same seed, same task)."),
    lm: str = typer.Option(None, "--lm", help="A litellm model string; default: the embedded local model."),
    api_base: str = typer.Option(None, "--api-base", help="OpenAI-compatible server URL for --lm."),
    max_iterations: int = typer.Option(4, "--max-iterations", help="Root turns before the answer is forced."),
    out: str = typer.Option(None, "--out", help="Where the trajectory is written (default runs/demo)."),
) -> None:
    """Run a Recursive Language Model on a generated counting task, live, with the embedded model."""
    with exit_on_error():
        _run(length, seed, lm, api_base, max_iterations, Path(out or "runs/demo"))


def _run(length: int, seed: int, lm: str | None, api_base: str | None, max_iterations: int, out: Path) -> None:
    import rlmkit
    from programs.tasks import generate, score
    from rlmkit.prompting import Display
    from signatures import AggregationQA

    example = generate("aggregation", n=1, length=length, seed=seed, labelled=True, question="count")[0]
    console.print(f"[bold]rlmkit demo[/bold]: {example.meta['records']:,} records, {len(example.context):,} "
                  f"characters; the model sees only a preview and reads the rest with code.")
    console.print(f"question: {escape(example.inputs['question'])}")
    if lm in EMBEDDED_FLAGS:
        console.print("starting the embedded model (Qwen2.5-Coder-1.5B, CPU) ...")
    # a small model writes short turns; a provider's model keeps its own max_tokens
    short = {"max_tokens": 400} if lm in EMBEDDED_FLAGS else {}
    model = lm_from_flag(lm, api_base, temperature=0.0, **short)
    stream_dir = out / f"run-{time.strftime('%Y%m%d-%H%M%S')}"
    rlm = rlmkit.RLM(AggregationQA, lm=model, max_iterations=max_iterations, log_dir=stream_dir,
                     instructions=DEMO_INSTRUCTIONS, display=Display(max_output_chars=DEMO_DISPLAY_OUTPUT_CHARS))
    started = time.monotonic()
    task = {"suite": "aggregation", "example_id": example.id, "seed": seed, "length": length, "demo": True}
    console.print(f"[dim]up to {max_iterations} turns; each turn's code appears when the model has written it "
                  "and the REPL has run it (on 2 CPU cores a turn can take a minute)[/dim]")
    with TurnPrinter(stream_dir, started):
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
    console.print(f"\nanswer: [bold]{escape(str(answer))}[/bold]   gold: [bold]{example.gold}[/bold]   "
                  f"score: [{colour}]{value:.3f}[/{colour}] (OOLONG: 0.75^|error|)   wall: {wall:.0f}s")
    console.print(f"trajectory: {path}")
    console.print(NEXT_STEPS.format(trajectory=path))


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

"""Demonstrations for the root model, taken from successful trajectories.

A demo shows the root model one whole solved run: the inputs as the RLM itself describes
them (type, size, a short preview — never a long context's body), then each turn's reply
verbatim (so the code and the ending, ``SUBMIT(...)`` / ``FINAL(...)`` / ``answer[...]``,
are already in the protocol the run used) with a bounded copy of what the REPL printed,
and the final outputs. A transcript is trimmed to a size cap: outputs are cut first, then
middle turns are dropped, keeping the first turn (how to look at the data) and the last
(how to finish).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rlmkit.trajectory import Trajectory, bounded

DEFAULT_MAX_CHARS = 2_000  # per demo transcript
OUTPUT_CHARS = 300  # REPL output kept per turn before the cap squeezes further


@dataclass
class ScoredRun:
    """A finished run and its metric value (what the tuner collects while bootstrapping)."""

    trajectory: Trajectory
    score: float
    example: Any = None  # the train example, when known (for its labels)

    @property
    def succeeded(self) -> bool:
        return self.trajectory.status == "ok" and self.score > 0


def _inputs_line(trajectory: Trajectory) -> str:
    parts = [
        f"{info.name} ({info.type}, {info.size:,} {'chars' if info.type == 'str' else 'items'}): "
        f"{bounded(info.preview, 120)!r}"
        for info in trajectory.meta.inputs
    ]
    return "Inputs: " + "; ".join(parts) if parts else "Inputs: (none)"


def _turn_text(index: int, reply: str, output: str) -> str:
    text = f"Turn {index + 1}:\n{reply.strip()}"
    if output.strip():
        text += f"\nREPL output:\n{output.strip()}"
    return text


def _turn_output(turn: Any, limit: int) -> str:
    pieces = []
    for block in turn.blocks:
        piece = block.stdout or ""
        if block.error:
            piece += ("\n" if piece else "") + block.error.strip().splitlines()[-1]
        if piece:
            pieces.append(piece)
    return bounded("\n".join(pieces), limit)


def render_transcript(trajectory: Trajectory, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """The run as the root model would have written it, within ``max_chars``."""
    outputs = json.dumps(trajectory.outputs or {}, ensure_ascii=False, default=str)
    head = _inputs_line(trajectory)
    tail = f"Outputs: {bounded(outputs, 300)}"
    turns = list(trajectory.turns)
    for output_limit in (OUTPUT_CHARS, 120, 0):
        texts = [_turn_text(t.index, t.reply, _turn_output(t, output_limit)) for t in turns]
        text = _join(head, texts, tail)
        if len(text) <= max_chars:
            return text
    # Still too long: keep the first and last turns, drop the middle.
    if len(texts) > 2:
        omitted = f"[... {len(texts) - 2} turns omitted ...]"
        texts = [texts[0], omitted, texts[-1]]
        text = _join(head, texts, tail)
    return text if len(text) <= max_chars else bounded(text, max_chars - 40)


def _join(head: str, turns: Sequence[str], tail: str) -> str:
    return "\n\n".join([head, *turns, tail])


def rank_runs(runs: Iterable[ScoredRun]) -> list[ScoredRun]:
    """Successful runs, best first: higher score, fewer turns, cheaper. One per input set."""
    seen: set[tuple[str, ...]] = set()
    ranked = []
    ordered = sorted(
        (run for run in runs if run.succeeded),
        key=lambda r: (-r.score, r.trajectory.n_turns, r.trajectory.usage.total_tokens),
    )
    for run in ordered:
        key = tuple(info.sha256 for info in run.trajectory.meta.inputs)
        if key in seen:
            continue
        seen.add(key)
        ranked.append(run)
    return ranked


def demo_from_run(run: ScoredRun, max_chars: int = DEFAULT_MAX_CHARS) -> Any:
    """A ``dspy.Example`` for the root predictor: previews of the inputs, outputs, transcript."""
    import dspy

    trajectory = run.trajectory
    fields: dict[str, Any] = {info.name: info.preview for info in trajectory.meta.inputs}
    fields.update(trajectory.outputs or {})
    fields["transcript"] = render_transcript(trajectory, max_chars)
    return dspy.Example(augmented=True, **fields)


def select_demos(runs: Iterable[ScoredRun], k: int, max_chars: int = DEFAULT_MAX_CHARS) -> list[Any]:
    """The ``k`` best successful runs as demos (fewer when fewer runs succeeded)."""
    return [demo_from_run(run, max_chars) for run in rank_runs(runs)[:k]]

"""Continue an evaluation's failed runs from their last turn: K new endings after each one's prefix.

    rlmkit eval source --n 12 --length 50000 --seed 200 --samples 4 --temperature 0.8 \\
        --out runs/branch --branch-from runs/sample --lm-cache runs/sample-cache

Each run of ``--branch-from`` that scored below ``below`` and took two turns or more is an origin:
its root turns before the last are played back (``rlmkit.run.replay``), and the model writes the
last turn again, ``samples`` times, and goes on from there as any run does. A continuation that
ends right beside the origin that ended wrong is a preference pair at the turn that decided the
answer; ``rlmkit compile dpo`` pairs them by the ``branch`` record each continuation's
trajectory keeps (``meta.task["branch"]``: the origin's run id, its sample, the turn).

The origin folder must hold runs of this very configuration (suite, length, seed, program, model
and limits): otherwise the recorded prompts cannot come back, and every continuation would stop
at the first one that differs. Give the continuations the origin's LM cache, so sub-calls made
before the last turn are answered as they were.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from programs.eval_results import ExampleResult
from programs.tasks import Example
from rlmkit.errors import UserError
from rlmkit.run.replay import Branch
from rlmkit.trajectory import Trajectory, TrajectoryLog

if TYPE_CHECKING:  # imported where used: importing the module here would hide the package's
    from programs.evaluate import Metric  # lazily loaded `programs.evaluate` function behind it

# A continuation's sample number (its rollout id): FIRST_SAMPLE + origin sample x PER_ORIGIN + k.
# Ordinary samples count from 0, so a continuation never shares an ordinary run's cache entries.
FIRST_SAMPLE = 1000
PER_ORIGIN = 100


@dataclass(frozen=True)
class Origin:
    """A recorded run to continue: ``example`` it answered, ``run`` itself, its ``sample``."""

    example: Example
    run: Trajectory
    sample: int

    @property
    def turn(self) -> int:
        """The turn the model writes again: the run's last."""
        return self.run.n_turns - 1

    def number(self, k: int) -> int:
        return FIRST_SAMPLE + self.sample * PER_ORIGIN + k

    def record(self) -> dict[str, Any]:
        """What each continuation's trajectory keeps of its origin (``meta.task["branch"]``)."""
        return {"of": self.run.meta.run_id, "sample": self.sample, "turn": self.turn}


@dataclass(frozen=True)
class BranchPlan:
    """The origins read from one evaluation folder and the runs that continue them."""

    origins: tuple[Origin, ...]
    samples: int
    config: dict[str, Any]  # the continuations' run folder configuration

    @classmethod
    def read(
        cls,
        folder: str | Path,
        examples: Sequence[Example],
        config: dict[str, Any],
        *,
        below: float,
        samples: int,
    ) -> BranchPlan:
        """The runs of ``folder`` to continue (maybe none: every run right, or one turn long).
        Refused (``UserError``, before any model call) if the folder holds another configuration
        than ``config``."""
        from programs.evaluate import latest_rows

        folder = Path(folder)
        stored = folder / "config.json"
        if not stored.is_file():
            raise UserError(f"--branch-from {folder}: no config.json there (not an `rlmkit eval` folder)")
        kept = json.loads(stored.read_text())
        if kept.get("config") != json.loads(json.dumps(config, default=str)):
            raise UserError(
                f"--branch-from {folder} holds runs of another configuration: continue them with its "
                f"own arguments (stored: {json.dumps(kept.get('config'), sort_keys=True)})"
            )
        if not 1 <= samples < PER_ORIGIN:
            raise UserError(f"--samples must be 1..{PER_ORIGIN - 1} when continuing runs, got {samples}")
        if any(example.meta.get("context_group") is not None for example in examples):
            raise UserError("runs whose questions share one session cannot be continued from a turn")
        by_id = {example.id: example for example in examples}
        runs = {run.meta.run_id: run for run in TrajectoryLog(folder / "trajectories").runs()}
        origins = []
        for row in latest_rows(folder / "results.jsonl"):
            run = runs.get(row.run_id or "")
            if (
                row.program == "program"
                and row.sample < FIRST_SAMPLE  # a continuation is not continued again
                and row.score < below
                and row.id in by_id
                and run is not None
                and run.n_turns >= 2
            ):
                origins.append(Origin(by_id[row.id], run, row.sample))
        branch = {"of": kept.get("hash"), "below": below}
        return cls(tuple(origins), samples, {**config, "branch": branch})

    @property
    def continuations(self) -> list[tuple[Origin, int]]:
        """Each continuation: its origin and its sample number (its rollout id)."""
        return [(o, o.number(k)) for o in self.origins for k in range(self.samples)]

    @property
    def plan(self) -> list[tuple[Example, int]]:
        """``evaluate_plan``'s runs: each origin's example, under each continuation's number."""
        return [(o.example, number) for o, number in self.continuations]

    def branches(self) -> list[tuple[int, Branch]]:
        """``ReplayedPrefix``'s table: a continuation's rollout id and where it starts."""
        # sample 0 ran under rollout id None
        return [(number, Branch(o.run, o.turn, o.sample or None)) for o, number in self.continuations]

    def runner(self) -> Callable[..., Any]:
        """``evaluate_plan``'s runner: one continuation, its trajectory marked with its origin."""
        origins = {(o.example.id, number): o for o, number in self.continuations}
        return functools.partial(_continue, origins=origins)


def _continue(
    program: Any, example: Example, *, metric: Metric, kind: str, sample: int, origins: dict
) -> tuple[ExampleResult, Trajectory | None]:
    from programs.evaluate import run_one

    row, trajectory = run_one(program, example, metric, kind, sample)
    if trajectory is not None:
        trajectory.meta.task["branch"] = origins[(example.id, sample)].record()
    return row, trajectory


__all__ = ["FIRST_SAMPLE", "PER_ORIGIN", "BranchPlan", "Origin"]

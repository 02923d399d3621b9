"""Scoring one configuration: examples in stages, metric checked, cost counted.

A trial runs its program on a growing prefix of one fixed, shuffled order of the train set
(the same order for every trial, so partial results compare like with like) and, after
each stage, asks the tuner whether to stop (prune). A run that fails (``RunError``: budget,
max iterations, bad output) scores 0 and still costs what it spent; a provider failure or a
metric that raises or returns a non-number fails the whole trial with that message, and
the study goes on.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rlmkit.errors import LMError, RLMKitError, RunError

COST_UNITS = ("usd", "tokens")


class TrialFailure(RLMKitError):
    """A trial could not be scored; optuna records it as FAIL with this message."""


@dataclass
class Tally:
    scores: list[float] = field(default_factory=list)
    costs: list[float] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.scores)

    @property
    def accuracy(self) -> float:
        return sum(self.scores) / self.n if self.n else 0.0

    @property
    def cost(self) -> float:
        return sum(self.costs) / self.n if self.n else 0.0


def default_stages(n: int) -> list[int]:
    """Growing subsample sizes: a quarter, a half, then everything (fewer for tiny sets)."""
    if n <= 3:
        return [n]
    sizes = sorted({max(1, math.ceil(n / 4)), max(1, math.ceil(n / 2)), n})
    return sizes


def usage_cost(usage: Any, unit: str) -> float:
    if usage is None:
        return 0.0
    return float(usage.cost or 0.0) if unit == "usd" else float(usage.prompt_tokens + usage.completion_tokens)


def check_score(value: Any) -> float:
    """The metric's value as a float, or TrialFailure if it is not a finite number."""
    if isinstance(value, bool):
        return float(value)
    if not isinstance(value, numbers.Real):
        raise TrialFailure(f"metric returned {type(value).__name__} {value!r:.80}, not a number")
    value = float(value)
    if not math.isfinite(value):
        raise TrialFailure(f"metric returned {value}, not a finite number")
    return value


def example_inputs(example: Any) -> dict[str, Any]:
    """The program's keyword arguments: ``dspy.Example.inputs()`` or a task Example's ``.inputs`` dict."""
    inputs = example.inputs
    return dict(inputs() if callable(inputs) else inputs)


def score_example(program: Any, example: Any, metric: Callable, unit: str) -> tuple[float, float]:
    """(score, cost) of one example."""
    try:
        prediction = program(**example_inputs(example))
    except RunError as exc:  # the configuration failed on this example: a zero, not a crash
        trajectory = getattr(exc, "trajectory", None)
        return 0.0, usage_cost(getattr(trajectory, "usage", None), unit)
    except LMError as exc:
        raise TrialFailure(f"the model failed: {type(exc).__name__}: {exc}") from exc
    except Exception as exc:
        raise TrialFailure(f"the program raised {type(exc).__name__}: {exc}") from exc
    trajectory = getattr(prediction, "trajectory", None)
    cost = usage_cost(getattr(trajectory, "usage", None), unit)
    try:
        value = metric(example, prediction)
    except Exception as exc:
        raise TrialFailure(f"metric raised {type(exc).__name__}: {exc}") from exc
    return check_score(value), cost


def evaluate_in_stages(
    program: Any,
    examples: Sequence[Any],
    metric: Callable,
    unit: str,
    stages: Sequence[int],
    after_stage: Callable[[Tally], None],
    after_example: Callable[[Tally], None] | None = None,
) -> Tally:
    """Score ``examples`` stage by stage; ``after_stage`` may raise optuna.TrialPruned."""
    tally = Tally()
    for size in stages:
        for example in examples[tally.n : size]:
            score, cost = score_example(program, example, metric, unit)
            tally.scores.append(score)
            tally.costs.append(cost)
            if after_example:
                after_example(tally)
        after_stage(tally)
    return tally

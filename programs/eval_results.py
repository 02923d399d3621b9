"""What an evaluation returns: one ``ExampleResult`` row per run of an example (appended to a
run directory's ``results.jsonl`` as each finishes) and the ``EvalResult`` over them (mean score,
95% interval, cost, tokens, failures by kind; a table next to the baseline's)."""

from __future__ import annotations

import io
import random
import statistics
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from rlmkit.errors import LMUnavailableError


class ExampleResult(BaseModel):
    id: str
    suite: str
    sample: int = 0  # which of the example's ``samples`` runs (its rollout id)
    program: Literal["program", "plain", "baseline"] = "program"
    status: Literal["ok", "failed"] = "ok"
    failure: str | None = None  # kind, e.g. "lm_error", "max_iterations"
    error: str | None = None
    score: float = 0.0
    answer: Any = None
    gold: Any = None
    cost: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0
    # of ``calls``, those answered from the LM cache: a run made of replayed replies measured
    # nothing new (a greedy run of the same model and prompt another day cached them)
    cached_calls: int = 0
    subcalls: int = 0
    iterations: int = 0
    wall_s: float = 0.0
    run_id: str | None = None

    @property
    def key(self) -> tuple[str, int, str]:
        """What a resumed evaluation matches rows by: a later row for a key replaces an earlier one."""
        return (self.id, self.sample, self.program)

    @property
    def never_answered(self) -> bool:
        """The model could not be reached (its server gone, or too slow for the client's timeout)
        for this run: it measured nothing about the program, so a resumed evaluation runs it again."""
        return LMUnavailableError.recorded_in(self.failure, self.error)


class EvalResult(BaseModel):
    config: dict[str, Any] = Field(default_factory=dict)
    rows: list[ExampleResult] = Field(default_factory=list)
    plain: EvalResult | None = None  # the suite's signature alone (plain_for), when run beside
    baseline: EvalResult | None = None
    out_dir: str | None = None

    @property
    def n(self) -> int:
        return len(self.rows)

    @property
    def mean(self) -> float:
        return sum(r.score for r in self.rows) / self.n if self.rows else 0.0

    @property
    def ci95(self) -> tuple[float, float]:
        """95% bootstrap interval of the mean score (see ``bootstrap_ci``)."""
        return bootstrap_ci([r.score for r in self.rows])

    @property
    def failures(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for row in self.rows:
            if row.failure:
                out[row.failure] = out.get(row.failure, 0) + 1
        return out

    @property
    def same_letter_baseline(self) -> float | None:
        """For a multiple-choice suite (every gold one option letter): the best score of answering
        one letter to every example, what an arm must beat to have read anything; else None."""
        golds = [row.gold for row in self.rows]
        if not golds or not all(isinstance(g, str) and len(g) == 1 and "A" <= g <= "Z" for g in golds):
            return None
        return max(golds.count(letter) for letter in set(golds)) / len(golds)

    def totals(self) -> dict[str, float]:
        per = max(1, self.n)
        return {
            "cost": sum(r.cost for r in self.rows),
            "calls": sum(r.calls for r in self.rows),
            "cached_calls": sum(r.cached_calls for r in self.rows),
            "tokens": sum(r.prompt_tokens + r.completion_tokens for r in self.rows),
            "subcalls_per_example": sum(r.subcalls for r in self.rows) / per,
            "iterations_per_example": sum(r.iterations for r in self.rows) / per,
            "wall_s_per_example": sum(r.wall_s for r in self.rows) / per,
        }

    def summary(self) -> dict[str, Any]:
        low, high = self.ci95
        return {
            "n": self.n,
            "mean": self.mean,
            "ci95": [low, high],
            **self.totals(),
            "failures": self.failures,
            **(
                {}
                if self.same_letter_baseline is None
                else {"same_letter_baseline": self.same_letter_baseline}
            ),
        }

    def table(self, title: str | None = None):
        """A rich Table: one line for the program, and one each for the plain RLM and the baseline
        when they ran beside it."""
        from rich.table import Table

        table = Table(title=title or "results")
        for column in (
            "program",
            "n",
            "mean score (95% CI)",
            "cost $",
            "tokens",
            "sub-calls/ex",
            "iters/ex",
            "wall s/ex",
            "failures",
        ):
            table.add_column(column, justify="left" if column in ("program", "failures") else "right")
        for name, result in (("program", self), ("plain", self.plain), ("baseline", self.baseline)):
            if result is None:
                continue
            low, high = result.ci95
            t = result.totals()
            failures = ", ".join(f"{k}: {v}" for k, v in sorted(result.failures.items())) or "-"
            table.add_row(
                name,
                str(result.n),
                f"{result.mean:.3f} [{low:.3f}, {high:.3f}]",
                f"{t['cost']:.4f}",
                f"{int(t['tokens']):,}",
                f"{t['subcalls_per_example']:.1f}",
                f"{t['iterations_per_example']:.1f}",
                f"{t['wall_s_per_example']:.1f}",
                failures,
            )
        return table

    def render(self, width: int = 140) -> str:
        from rich.console import Console

        console = Console(width=width, file=io.StringIO())
        console.print(self.table())
        return console.file.getvalue()


def bootstrap_ci(scores: Sequence[float], *, resamples: int = 5_000, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap 95% interval of the mean of ``scores``.

    Suite scores are fractional (0.75^|error|, F1, a ratio), so a binomial interval, which
    assumes each score is 0 or 1, would be wrong; the bootstrap assumes nothing about their
    shape. Seeded, so the same scores always give the same interval."""
    n = len(scores)
    if n < 2:
        mean = scores[0] if scores else 0.0
        return (mean, mean)
    rng = random.Random(seed)
    means = sorted(statistics.fmean(rng.choices(scores, k=n)) for _ in range(resamples))
    return (means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1])

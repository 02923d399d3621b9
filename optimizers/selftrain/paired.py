"""Paired comparison of two arms on the same examples: mean difference with a bootstrap interval.

Each example is scored once by each arm; resampling examples (not scores) keeps the pairs
together, so the interval reflects how much the *difference* varies across examples, which
is much tighter than two independent intervals when both arms find the same examples hard."""

from __future__ import annotations

import random
import statistics
from collections.abc import Mapping

from pydantic import BaseModel


class PairedResult(BaseModel):
    n: int
    base_mean: float
    other_mean: float
    gain: float  # other - base
    ci95: tuple[float, float]  # percentile bootstrap interval of the gain
    wins: int  # examples the other arm scored higher on
    losses: int


def paired_compare(
    base: Mapping[str, float], other: Mapping[str, float], *, resamples: int = 5_000, seed: int = 0
) -> PairedResult:
    """Compare on the examples both arms scored (ids present in both). Seeded: same scores, same
    interval."""
    ids = sorted(set(base) & set(other))
    if not ids:
        raise ValueError("the two arms share no scored example")
    diffs = [other[i] - base[i] for i in ids]
    rng = random.Random(seed)
    means = sorted(statistics.fmean(rng.choices(diffs, k=len(diffs))) for _ in range(resamples))
    low, high = (
        (means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1])
        if len(ids) > 1
        else (
            diffs[0],
            diffs[0],
        )
    )
    return PairedResult(
        n=len(ids),
        base_mean=statistics.fmean(base[i] for i in ids),
        other_mean=statistics.fmean(other[i] for i in ids),
        gain=statistics.fmean(diffs),
        ci95=(low, high),
        wins=sum(d > 0 for d in diffs),
        losses=sum(d < 0 for d in diffs),
    )


COLUMNS = (
    "suite",
    "trained on",
    "n",
    "base",
    "adapter",
    "gain [95% CI]",
    "wins / losses",
    "turns",
    "tokens",
    "s/example",
)


def report_cells(row: dict) -> list[str]:
    """One compared suite (``SelfTrain.comparison``'s row) as the report's cells, in ``COLUMNS`` order."""
    low, high = row["ci95"]
    b, a = row["base_per_example"], row["adapter_per_example"]
    return [
        row["suite"] + ("" if row.get("finished", True) else " (unfinished: runs so far)"),
        "yes" if row["trained_on"] else "no",
        str(row["n"]),
        f"{row['base_mean']:.2f}",
        f"{row['other_mean']:.2f}",
        f"{row['gain']:+.2f} [{low:+.2f}, {high:+.2f}]",
        f"{row['wins']} / {row['losses']}",
        f"{b['iterations']:.1f} / {a['iterations']:.1f}",
        f"{b['tokens']:,.0f} / {a['tokens']:,.0f}",
        f"{b['wall_s']:.0f} / {a['wall_s']:.0f}",
    ]

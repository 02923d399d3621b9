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

"""Which split a generator seed belongs to: the one place every family and corpus asks.

- ``train``: seeds below ``DEV_SEEDS``; examples for training rows and prompt tuning's trainset;
- ``dev``: seeds from ``DEV_SEEDS`` up to ``TEST_SEEDS``; every choice (recipe, families, prompt,
  round, thresholds) is made here;
- ``test``: seeds from ``TEST_SEEDS`` up; read once per frozen candidate, never for a choice.

A split is more than a seed range: real-text families read the split's own documents
(``real_text.documents``) and inserted-fact families draw the split's own names, fact frames and
question wordings (``pools``), so a habit learned on train (or tuned on dev) cannot pass test by
recognising a template.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, TypeVar, get_args

from programs.tasks.base import TaskError

Split = Literal["train", "dev", "test"]
SPLITS: tuple[Split, ...] = get_args(Split)
# Seeds from here up are dev. The self-training recipe draws its training seeds below the same
# number (optimizers/selftrain/recipe.py: HELD_OUT_SEEDS); a test checks the two agree.
DEV_SEEDS = 1000
TEST_SEEDS = 5000

T = TypeVar("T")


def split_for(seed: int) -> Split:
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise TaskError(f"a generator seed is an int >= 0, got {seed!r}")
    if seed >= TEST_SEEDS:
        return "test"
    return "dev" if seed >= DEV_SEEDS else "train"


def pools(seed: int, by_split: Mapping[Split, T]) -> T:
    """The pool (of names, frames, wordings ...) that examples of ``seed``'s split draw from."""
    return by_split[split_for(seed)]

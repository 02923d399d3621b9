"""A train/validation split that is deterministic per seed and never splits one task across both."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import TypeVar

Row = TypeVar("Row")


def validation_tasks(task_ids: Sequence[str], *, seed: int, val_fraction: float) -> set[str]:
    """The tasks that go to validation: ``round(n * val_fraction)`` of them (at least one when the
    fraction is positive and there are two or more tasks), chosen by a seeded hash of each id,
    so the choice does not depend on input order and changes only with the seed."""
    if not 0.0 <= val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in [0, 1), got {val_fraction}")
    tasks = sorted(set(task_ids))
    if val_fraction == 0.0 or len(tasks) < 2:
        return set()
    count = min(len(tasks) - 1, max(1, math.floor(len(tasks) * val_fraction + 0.5)))
    ranked = sorted(tasks, key=lambda t: hashlib.sha256(f"{seed}\x00{t}".encode()).hexdigest())
    return set(ranked[:count])


def split_rows(
    rows: Sequence[Row], *, seed: int = 0, val_fraction: float = 0.1
) -> tuple[list[Row], list[Row]]:
    """(train, validation), each in the input order; rows of one task_id land on one side."""
    held_out = validation_tasks([row.task_id for row in rows], seed=seed, val_fraction=val_fraction)
    train = [row for row in rows if row.task_id not in held_out]
    validation = [row for row in rows if row.task_id in held_out]
    return train, validation

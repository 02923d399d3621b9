"""Rebuild the generated example behind a compiled training row, so rows play again as RLM runs.

A compiled RL row describes its inputs (name, size, preview) without their bodies; it names
its task instead (``suite``, ``seed``, ``length``, ``example_id`` and the knobs, recorded by
``programs.evaluate``). Generators are pure functions of those, so the example comes back
byte for byte. Name these in a training job's options:

    options.example_fn = "programs.tasks.replay:example_of"   # what the scorer gets
    options.inputs_fn  = "programs.tasks.replay:inputs_of"    # what the RLM gets
"""

from __future__ import annotations

import json
from typing import Any

from programs.tasks import Example, generate
from programs.tasks.base import TaskError, example_id


def example_of(row: Any) -> Example:
    """The Example a compiled row (``RLRow``) was made from; TaskError if the row names none."""
    task = dict(row.example or {})
    missing = [key for key in ("suite", "example_id", "seed", "length") if task.get(key) is None]
    if missing:
        raise TaskError(
            f"row {row.id} does not name its generated task (missing {missing}): "
            "compile rows from `rlmkit eval` runs"
        )
    suite, seed, wanted = task["suite"], int(task["seed"]), str(task["example_id"])
    index = int(wanted.rsplit("-", 1)[-1])
    if example_id(suite, seed, index) != wanted:
        raise TaskError(f"row {row.id}: {wanted!r} is not an example id of suite {suite!r}, seed {seed}")
    example = generate(suite, n=index + 1, length=int(task["length"]), seed=seed, **dict(row.reward.knobs))[
        index
    ]
    if json.loads(row.answer) != json.loads(json.dumps(example.gold, default=str)):
        raise TaskError(
            f"row {row.id}: the regenerated example's gold differs from the row's answer "
            "(the generator changed since the run?)"
        )
    return example


def inputs_of(row: Any) -> dict[str, Any]:
    """The program inputs of the row's example (the long context included)."""
    return dict(example_of(row).inputs)

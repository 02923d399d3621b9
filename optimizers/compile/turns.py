"""Views of a trajectory that every compiler needs: prompts per turn, task ids, output fields."""

from __future__ import annotations

import hashlib
import re

from rlmkit.trajectory import Trajectory

# what ``rlmkit.trajectory.bounded`` leaves where it cut a long text
TRUNCATION_MARK = re.compile(r"\n\.\.\. \[[\d,]+ characters cut\] \.\.\.\n")


def is_linear(trajectory: Trajectory) -> bool:
    """True when every turn extends the previous one (no history was dropped or rewritten)."""
    length = 0
    for turn in trajectory.turns:
        if turn.keep != length:
            return False
        length = turn.keep + len(turn.new_messages) + 1
    return True


def task_id(trajectory: Trajectory) -> str:
    """The example a run answered: what the split keeps on one side and groups are built from.

    ``task["task_id"]`` if given, else ``suite/example_id`` (with ``@length`` where the task
    records one: a suite draws another example, another key and gold, at each length under the
    same id), else a hash of the signature and the inputs' hashes (runs over the same inputs are
    the same task).
    """
    task = trajectory.meta.task or {}
    if task.get("task_id") is not None:
        return str(task["task_id"])
    if task.get("example_id") is not None:
        suite, length = task.get("suite"), task.get("length")
        example = f"{task['example_id']}@{length}" if length else str(task["example_id"])
        return f"{suite}/{example}" if suite else example
    digest = hashlib.sha256(trajectory.meta.signature.encode())
    for var in sorted(trajectory.meta.inputs, key=lambda v: v.name):
        digest.update(f"{var.name}={var.sha256};".encode())
    return "inputs:" + digest.hexdigest()[:16]


def output_fields(trajectory: Trajectory) -> dict[str, str]:
    """Output field name -> type name, read from the signature string ("a, b -> x: int, y")."""
    signature = trajectory.meta.signature
    if "->" in signature:
        fields: dict[str, str] = {}
        for part in _split_top_level(signature.split("->", 1)[1]):
            name, _, type_ = part.partition(":")
            if name.strip():
                fields[name.strip()] = type_.strip() or "str"
        if fields:
            return fields
    return {name: type(value).__name__ for name, value in (trajectory.outputs or {}).items()}


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside brackets (``dict[str, int]`` stays whole)."""
    parts, depth, current = [], 0, []
    for char in text:
        if char in "[(":
            depth += 1
        elif char in "])":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def run_cost(trajectory: Trajectory) -> tuple[float, int]:
    """What a run spent, for tie-breaks: (dollars, tokens)."""
    return trajectory.usage.cost, trajectory.usage.total_tokens

"""Runs sampled with a hint (the gold answer in their question; ``programs/hints.py``).

Such a run trains only if it found the answer by reading: REPL output printed before its final
turn shows every part of the gold. Its rows are then written with the hint's text removed from
every message, output and input preview, so nothing the model trains on tells it the answer."""

from __future__ import annotations

from typing import Any

from rlmkit.trajectory import Trajectory


def hint_of(run: Trajectory) -> str | None:
    meta = (run.meta.task or {}).get("meta") or {}
    return meta.get("hint") or None


def read_before_answering(run: Trajectory) -> bool:
    """Whether the output of the turns before the last shows every part of the gold answer."""
    gold = (run.meta.task or {}).get("gold")
    parts = [str(item) for item in gold] if isinstance(gold, (list, tuple)) else [str(gold)]
    hint = hint_of(run) or ""
    printed = "\n".join(block.stdout for turn in run.turns[:-1] for block in turn.blocks).replace(hint, "")
    printed = printed.lower()
    return bool(parts) and all(part.lower() in printed for part in parts if part)


def without_hint(run: Trajectory) -> Trajectory:
    """A copy of ``run`` with the hint's text taken out wherever it was written."""
    hint = hint_of(run)
    if hint is None:
        return run
    data: Any = _strip(run.model_dump(), hint)
    data["meta"]["task"]["meta"]["hint"] = None  # the row says it was hinted, not what the hint was
    data["meta"]["task"]["meta"]["hinted"] = True
    return Trajectory.model_validate(data)


def _strip(value: Any, hint: str) -> Any:
    if isinstance(value, str):
        return value.replace(hint, "")
    if isinstance(value, dict):
        return {key: _strip(item, hint) for key, item in value.items()}
    if isinstance(value, list):
        return [_strip(item, hint) for item in value]
    return value

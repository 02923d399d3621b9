"""Hinted sampling (STaR's rationalization): a training example whose gold answer is in its question.

Where the base model rarely finds an answer by itself, a run that is told the answer can still
show how to find it: the question carries ``HINT`` with the gold, the run searches the input,
prints where the input says it, and submits. The compiler (``optimizers/compile/hints.py``) keeps
such a run only if REPL output printed before its final turn shows the gold and no step on the way
touched the hint (the model found it by reading), and writes its rows with the hint removed from
every message: the model trains on the run as if it had found the answer unaided. The hint's text
travels in the example's ``meta["hint"]`` (and so in the trajectory's ``task``), which is how the
compiler finds it.

Held-out seeds are never hinted: a hint shows the gold answer."""

from __future__ import annotations

from programs.tasks import Example
from programs.tasks.base import TaskError, as_text
from programs.tasks.real_text import HELD_OUT_SEEDS

HINT = (
    " (Hint for this run: the answer is {gold}. It is written in the input: find it there with code, "
    "print the part that says it, then SUBMIT the answer as written there. A sub-model asked the "
    "question does not know it.)"
)


class HintError(TaskError):
    """A hint asked for where it would leak the gold into a measurement."""


def hinted(example: Example) -> Example:
    """``example`` with the hint after its question (``meta["hint"]`` holds the exact text)."""
    if example.seed >= HELD_OUT_SEEDS:
        raise HintError(
            f"{example.id}: a hint shows the gold answer; only training seeds (below {HELD_OUT_SEEDS}) "
            "may be sampled with one"
        )
    if "question" not in example.inputs:
        raise HintError(f"{example.id}: a hint follows the question, and this example has none")
    gold = example.gold
    hint = HINT.format(
        gold=", ".join(map(as_text, gold)) if isinstance(gold, (list, tuple)) else as_text(gold)
    )
    inputs = {**example.inputs, "question": example.inputs["question"] + hint}
    return example.model_copy(update={"inputs": inputs, "meta": {**example.meta, "hint": hint}})

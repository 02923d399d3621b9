"""Guard rails every run gets, whatever the model: small models copy prompt text literally,
overwrite their inputs, loop, and write until they are stopped. The runtime, not the prompt,
keeps them on track.

- ``input_guard``: REPL code that restores a rebound input variable and says so.
- ``check_values``: ``SUBMIT(answer=str)`` hands over a type, not an answer: refuse it.
- ``Progress``: the same code (or reply) twice gets one nudge; again, and the next turn must answer.
- ``AnswerHold``: an answer given in a turn that also printed output is held back until the model
  has read that output and gives the same answer again (``hold_unread_answers``).
"""

from __future__ import annotations

import types
from dataclasses import dataclass, field

from rlmkit.prompting import INPUT_RESTORED, NOT_A_VALUE, NUDGE  # noqa: F401 - NUDGE re-exported

# -- inputs stay what they were ------------------------------------------------------
RESTORE_CALL = "_rlmkit_restore_inputs()"


def input_guard(names: list[str]) -> str:
    """Prelude source: keep each input object, and a function that puts back any input a cell
    rebound (``context = '...'`` copied from the preview), printing which. Plain ``global``
    statements, no ``globals()``: it runs in every sandbox backend."""
    if not names:
        return f"def {RESTORE_CALL[:-2]}():\n    pass\n"
    keep = ", ".join(names)
    lines = [
        f"_rlmkit_inputs = ({keep},)",
        f"def {RESTORE_CALL[:-2]}():",
        f"    global {keep}",
        "    restored = []",
    ]
    for i, name in enumerate(names):
        lines += [
            "    try:",
            f"        same = {name} is _rlmkit_inputs[{i}]",
            "    except NameError:",
            "        same = False",
            "    if not same:",
            f"        {name} = _rlmkit_inputs[{i}]",
            f"        restored.append({name!r})",
        ]
    before, after = INPUT_RESTORED.split("{names}")  # plain concatenation runs in every backend
    lines += ["    if restored:", f"        print({before!r} + ', '.join(restored) + {after!r})"]
    return "\n".join(lines) + "\n"


# -- submitted values are values -----------------------------------------------------
_NOT_VALUES = (type, types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.ModuleType)


def check_values(outputs: dict[str, object]) -> None:
    """Raise ValueError (fed back to the model) for a type, function or module given as an answer."""
    for name, value in outputs.items():
        if isinstance(value, _NOT_VALUES):
            kind = (
                "type"
                if isinstance(value, type)
                else "module"
                if isinstance(value, types.ModuleType)
                else "function"
            )
            shown = getattr(value, "__name__", value)
            raise ValueError(NOT_A_VALUE.format(name=name, value=shown, kind=kind))


# -- turns that go nowhere -------------------------------------------------------------


@dataclass
class Progress:
    """Remembers each turn's moves (its code, or its reply when it has none)."""

    seen: set[str] = field(default_factory=set)
    nudged: bool = False
    force_answer: bool = False  # set after a repeat that follows the nudge: the next turn is the last

    def after(self, reply: str, code_blocks: list[str]) -> str | None:
        """A nudge to add to the turn's feedback, or None."""
        moves = "\n".join(block.strip() for block in code_blocks) or reply.strip()
        repeated = moves in self.seen
        self.seen.add(moves)
        if not repeated:
            return None
        if self.nudged:
            self.force_answer = True
            return None
        self.nudged = True
        return NUDGE


# -- answers given before reading ------------------------------------------------------


@dataclass
class AnswerHold:
    """Small models often write a search or count and the finishing call in one cell, so the
    answer is whatever the code returned before the model saw a line of its output (a zero
    count, a wrong match). Such an answer is held once: the turn's output is shown, and the
    same answer given again, or any answer from a turn that printed nothing, is taken."""

    held: dict[str, object] | None = None

    def holds(self, outputs: dict[str, object], printed: bool) -> bool:
        """True when ``outputs`` must wait: its turn ``printed`` and it is not a confirmation."""
        if not printed or (self.held is not None and _same(outputs, self.held)):
            return False
        self.held = outputs
        return True


def _same(a: dict[str, object], b: dict[str, object]) -> bool:
    try:
        return bool(a == b)
    except Exception:  # values whose == raises or is ambiguous (arrays): compare what they show
        return repr(a) == repr(b)


__all__ = [
    "RESTORE_CALL",
    "AnswerHold",
    "Progress",
    "check_values",
    "input_guard",
]

"""The per-turn filter: which root turns of a good run are worth training on.

A run that ends well can still carry turns nobody should learn: code that raised, a reply that
invented its own REPL output, an answer the signature rejected, the same code written again. The
run-level filters (``Filters``) keep or drop whole runs; this one, on with ``Filters.per_turn``,
drops such turns one by one and counts each by its reason in the compile report."""

from __future__ import annotations

import re

from rlmkit.prompting import ANSWER_REJECTED
from rlmkit.trajectory import Turn

# A reply that writes what the REPL "printed" itself: a >>> prompt, an "Output:" or "REPL output:"
# heading, or a fenced block labelled output after the code.
_MADE_UP = re.compile(r"^\s*>>> |^\s*(REPL )?output:|```(output|text|console)\b", re.I | re.M)
_REJECTED = ANSWER_REJECTED.split("{")[0]
AFTER_REPEAT = "after_repeated_turn"


def turn_problem(turn: Turn) -> str | None:
    """Why ``turn`` is not a training target on its own, or None when it is."""
    if len(turn.blocks) != 1:
        return "not_one_code_block"
    block = turn.blocks[0]
    if _MADE_UP.search(turn.reply):
        return "made_up_repl_output"
    if block.error or block.timed_out or block.restarted:
        return "code_failed"
    if _REJECTED in (turn.feedback or ""):
        return "answer_rejected"
    return None


def turn_problems(turns: list[Turn]) -> dict[int, str]:
    """By turn index, why each dropped turn is dropped. A turn whose reply repeats an earlier
    turn's is dropped with every turn after it: past a loop the run trains nothing good."""
    problems: dict[int, str] = {}
    seen: set[str] = set()
    repeated = False
    for turn in turns:
        code = " ".join(turn.reply.split())  # the reply, spaces aside: the code as the model wrote it
        if repeated or (code and code in seen):
            problems[turn.index] = AFTER_REPEAT if repeated else "repeated_turn"
            repeated = True
            continue
        seen.add(code)
        if (problem := turn_problem(turn)) is not None:
            problems[turn.index] = problem
    return problems

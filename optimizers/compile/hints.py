"""Runs sampled with a hint (the gold answer in their question; ``programs/hints.py``).

Such a run trains only if it found the answer by reading: REPL output printed before its final
turn shows every part of the gold, or its final turn's code pulled the gold out and submitted it,
and the way there never touched the hint. Its rows are then written with the hint's text removed
from every message, output and input preview, so nothing the model trains on tells it the answer.

"Never touched the hint" is checked on every code block up to the one that first brought the gold
out: the hint reaches code only through text the model types or the ``question`` variable
(which holds the hint while sampling), so such a block may not name ``question`` or read the
namespace whole (``locals()``, ``globals()``, ``vars()``), its code may not hold the gold or the
hint's words, and no sub-call it made may have been sent them: a model that asks ``llm_query``
the hinted question gets the answer back without reading anything. A run that fails this is
dropped as ``hint_used``; the rule drops some honest runs (one that parses its key out of
``question``), never keeps one that copied the answer."""

from __future__ import annotations

import re
from typing import Any

from rlmkit.trajectory import CodeBlock, Trajectory

# the output field the suites score (programs.tasks.base.prediction_value)
SCORED_FIELD = "answer"
# code that can reach the hint without writing it: the hinted variable, or the namespace whole
_HINT_ROUTES = re.compile(r"\bquestion\b|\b(?:locals|globals|vars)\s*\(")


def hint_of(run: Trajectory) -> str | None:
    meta = (run.meta.task or {}).get("meta") or {}
    return meta.get("hint") or None


def _gold_parts(run: Trajectory) -> list[str]:
    gold = (run.meta.task or {}).get("gold")
    parts = [str(item) for item in gold] if isinstance(gold, (list, tuple)) else [str(gold)]
    return [part.lower() for part in parts if part]


def why_dropped(run: Trajectory) -> str | None:
    """Why a hinted run may not train: ``hint_not_read`` (the gold never came out of its code:
    no output before its last turn showed every part of it, and its last turn did not submit
    it), ``hint_used`` (a block up to the one that brought the gold out could have taken it from
    the hint), or None."""
    if (count := _first_reading_block(run)) is None:
        return "hint_not_read"
    blocks = [block for turn in run.turns for block in turn.blocks][:count]
    marks = [*_gold_parts(run), *_hint_words(hint_of(run) or "")]
    return "hint_used" if any(_touches(block, marks) for block in blocks) else None


def _first_reading_block(run: Trajectory) -> int | None:
    """How many blocks (in order) it took until the gold came out of code; None if it never did.

    Out of code means: the output of blocks before the last turn, the hint's text left out,
    showed every part of the gold; or, failing that, the answer the last turn submitted holds
    every part (code that pulls the value out of the input and submits it in one block reads
    as surely as code that prints it; that every block up to it, the last included, typed
    neither the gold nor the hint is ``why_dropped``'s check)."""
    parts, hint = _gold_parts(run), hint_of(run) or ""
    if not parts:
        return None
    printed, blocks = "", [block for turn in run.turns[:-1] for block in turn.blocks]
    for count, block in enumerate(blocks, 1):
        printed += "\n" + block.stdout.replace(hint, "").lower()
        if all(part in printed for part in parts):
            return count
    submitted = submitted_text(run).lower()
    if run.turns and run.turns[-1].final and all(part in submitted for part in parts):
        return len(blocks) + len(run.turns[-1].blocks)
    return None


def answer_typed(run: Trajectory) -> bool:
    """Whether the last turn typed its answer in before any output showed it: a right answer
    guessed (``SUBMIT(answer=2)`` after code that printed no 2) teaches guessing. Judged on what
    was submitted, not the gold, so a near miss that partial credit kept is judged alike. A part
    typed in its own words (a sentence answer restated: "The Wren project's maintainers agreed
    that ...") still counts as read when it holds a part of the gold that the output showed."""
    if not run.turns or not run.turns[-1].final:
        return False
    parts = [part.lower() for part in _answer_parts(_scored(run.outputs or {})) if part.strip()]
    code = "\n".join(block.code for block in run.turns[-1].blocks).lower()
    printed = "\n".join(block.stdout for turn in run.turns[:-1] for block in turn.blocks).lower()
    shown_gold = [gold for gold in _gold_parts(run) if _shown(printed, gold)]

    def read(part: str) -> bool:
        return _shown(printed, part) or any(_mentions(part, gold) for gold in shown_gold)

    return any(_mentions(code, part) and not read(part) for part in parts)


def submitted_text(run: Trajectory) -> str:
    """Every output the run submitted, as one text ("" when it submitted nothing)."""
    return " ".join(str(value) for value in (run.outputs or {}).values())


def _scored(outputs: dict[str, Any]) -> dict[str, Any]:
    """The outputs a guess could have scored with: the ``answer`` field where the signature has
    one (every suite scores it), else all. Other fields (a multihop run's ``citations``, the
    document numbers it read) are notes no scorer reads, so a number typed there is no guess
    that scored."""
    return {SCORED_FIELD: outputs[SCORED_FIELD]} if SCORED_FIELD in outputs else outputs


def _answer_parts(outputs: dict[str, Any]) -> list[str]:
    parts: list[str] = []
    for value in outputs.values():
        parts += [str(item) for item in value] if isinstance(value, (list, tuple)) else [str(value)]
    return parts


def _touches(block: CodeBlock, marks: list[str]) -> bool:
    code = block.code.lower()
    if _HINT_ROUTES.search(block.code) or any(_mentions(code, mark) for mark in marks):
        return True
    sent = [call.prompt + "".join(m.content for m in call.messages or []) for call in block.subcalls]
    return any(_mentions(text.lower(), mark) for text in sent for mark in marks)


# A count or an index: one to three digits, a token found in almost any printed text (source
# code, a page of prose), so finding it there shows nothing; a short line holding it does.
_SMALL_NUMBER = re.compile(r"-?\d{1,3}")
_SHORT_LINE = 40


def _shown(printed: str, part: str) -> bool:
    """Whether output showed ``part`` as a whole token; a small number only on a short line
    (``4``, ``records: 42``, ``4 methods``), not inside a longer text: a model that printed a
    window of a file and then typed ``SUBMIT(answer=2)`` for a count guessed."""
    if not _SMALL_NUMBER.fullmatch(part):
        return _mentions(printed, part)
    return any(len(line.strip()) <= _SHORT_LINE and _mentions(line, part) for line in printed.splitlines())


def _mentions(text: str, mark: str) -> bool:
    """``mark`` in ``text`` as a whole token: the gold 42 is not in 1420 nor in 42.5 or 0.42,
    but it is in "is: 42." (a sentence's full stop ends the token)."""
    return re.search(r"(?<!\w)(?<!\d\.)" + re.escape(mark) + r"(?![\w]|\.\d)", text) is not None


def _hint_words(hint: str) -> list[str]:
    """The hint's own wording, without the gold: a sentence of it typed into code is a copy."""
    return [hint.strip(" ()").split(":")[0].lower()] if hint.strip() else []


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

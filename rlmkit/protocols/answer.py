"""``answer``: the REPL holds ``answer = {"content": ..., "ready": False}`` (rlms >= 0.1.2).

The run ends after the first cell that leaves ``answer["ready"]`` true. With several output
fields, ``content`` is a dict of them.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import ClassVar

from rlmkit.prompting import ANSWER_TEXTS
from rlmkit.protocols.base import Answer, Parsed, Protocol, ReadVar
from rlmkit.protocols.endings import Ending, EndingError, Source, Value, Written, one_value


@dataclass
class AnswerProtocol(Protocol):
    name: str = "answer"
    finish_prompt: str = ANSWER_TEXTS.finish
    answer_now: str = ANSWER_TEXTS.answer_now
    prelude: str = 'answer = {"content": None, "ready": False}\n'
    code_words: ClassVar[tuple[str, ...]] = ("answer[",)
    code_marker: ClassVar[re.Pattern[str]] = re.compile(r"answer\[")

    def finish_example(self, output_fields: dict[str, str], variable: str) -> str:
        return f'answer["content"] = {variable}; answer["ready"] = True'

    def answer(
        self, parsed: Parsed, read_var: ReadVar, fields: list[str], *, turn_over: bool
    ) -> Answer | None:
        """After each cell (the run ends right after the block that sets ``ready``)."""
        if turn_over:
            return None
        answer = read_var("answer", None)
        if not isinstance(answer, dict) or not answer.get("ready"):
            return None
        content = answer.get("content")
        if isinstance(content, dict) and set(content) == set(fields):
            return Answer(outputs=content)
        return Answer(outputs={fields[0]: content})

    # ---------------------------------------------------------------- the ending grammar
    def read_statement(self, node: ast.AST, source: Source) -> Ending | None:
        """``answer["ready"] = True`` ends the run; ``answer["content"] = ...`` only sets its value."""
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            return None
        key = _answer_key(node.targets[0])
        if key == "content":
            return Ending(self.name, key, {"": Value(source.segment(node.value))}, ends_run=False)
        if key == "ready" and isinstance(node.value, ast.Constant) and node.value.value is True:
            return Ending(self.name, key, in_place=True)
        return None

    def ending_values(self, chosen: Ending, endings: list[Ending]) -> dict[str, Value]:
        """``ready`` takes the value of the last ``content`` set at the top of this reply's code."""
        content = [e for e in endings if e.form == "content" and e.block is not None and not e.nested]
        if not content:
            raise EndingError("answer_content_set_in_earlier_turn")
        return content[-1].values

    def write_ending(self, values: dict[str, Value], fields: dict[str, str]) -> Written:
        name, value = one_value(self.name, values)
        return Written(
            [f'answer["content"] = {value.as_expr(fields.get(name, "str"))}', 'answer["ready"] = True']
        )


def _answer_key(target: ast.AST) -> str | None:
    if (
        isinstance(target, ast.Subscript)
        and isinstance(target.value, ast.Name)
        and target.value.id == "answer"
        and isinstance(target.slice, ast.Constant)
    ):
        return str(target.slice.value)
    return None

"""``answer``: the REPL holds ``answer = {"content": ..., "ready": False}`` (rlms >= 0.1.2).

The run ends after the first cell that leaves ``answer["ready"]`` true. With several output
fields, ``content`` is a dict of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from rlmkit.protocols.base import Protocol


@dataclass
class AnswerProtocol(Protocol):
    name: str = "answer"
    finish_prompt: str = (
        'The REPL has a dict `answer = {{"content": None, "ready": False}}`. When you are done, set '
        'answer["content"] to your final answer ({fields}; a dict of them if there are several) and then '
        'answer["ready"] = True inside a ```repl block. The run ends right after that block.'
    )
    answer_now: str = (
        'You are out of turns. Reply now with one ```repl block that sets answer["content"] and '
        'answer["ready"] = True.'
    )
    prelude: str = 'answer = {"content": None, "ready": False}\n'

    def after_cell(self, read_var: Callable[[str], Any], fields: list[str]) -> dict[str, Any] | None:
        answer = read_var("answer")
        if not isinstance(answer, dict) or not answer.get("ready"):
            return None
        content = answer.get("content")
        if isinstance(content, dict) and set(content) == set(fields):
            return content
        return {fields[0]: content}

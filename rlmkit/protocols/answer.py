"""``answer``: the REPL holds ``answer = {"content": ..., "ready": False}`` (rlms >= 0.1.2).

The run ends after the first cell that leaves ``answer["ready"]`` true. With several output
fields, ``content`` is a dict of them.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlmkit.prompting import ANSWER_NOW, FINISH_PROMPT
from rlmkit.protocols.base import Answer, Parsed, Protocol, ReadVar


@dataclass
class AnswerProtocol(Protocol):
    name: str = "answer"
    finish_prompt: str = FINISH_PROMPT["answer"]
    answer_now: str = ANSWER_NOW["answer"]
    prelude: str = 'answer = {"content": None, "ready": False}\n'

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

"""``submit`` (default): the model calls ``SUBMIT(field=value, ...)`` inside REPL code.

Outputs are validated against the signature's output fields when SUBMIT is called; a type
or missing-field error is raised inside the cell, so the model sees it as the cell's output
and can try again on its next turn.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlmkit.prompting import ANSWER_NOW, FINISH_PROMPT
from rlmkit.protocols.base import Protocol, finish_with


@dataclass
class SubmitProtocol(Protocol):
    name: str = "submit"
    finish_prompt: str = FINISH_PROMPT["submit"]
    answer_now: str = ANSWER_NOW["submit"]

    def render_finish(self, output_fields: dict[str, str]) -> str:
        """Show the call with values (``SUBMIT(answer=answer)``): small models copy a rendered
        ``SUBMIT(answer=str)`` literally. The types are in the task message."""
        fields = ", ".join(f"{name}={name}" for name in output_fields)
        return self.finish_prompt.format(fields=fields, first=next(iter(output_fields)))

    def host_functions(self, submit: Callable[[dict[str, Any]], None], fields: list[str]):
        def SUBMIT(*args: Any, **kwargs: Any) -> None:
            if args:
                if len(args) > len(fields):
                    raise TypeError(
                        f"SUBMIT takes the output fields {fields}; got {len(args)} positional values"
                    )
                kwargs = {**dict(zip(fields, args)), **kwargs}
            finish_with(submit, kwargs)

        return {"SUBMIT": SUBMIT}

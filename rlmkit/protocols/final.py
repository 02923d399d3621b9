"""``final``: ``FINAL(value)`` / ``FINAL_VAR(name)``, the convention RLM-Qwen3-8B was trained on.

Both work inside code (as functions) and in the reply's prose. Prose forms tolerate the
templated mistakes seen in practice: quotes around the value or the variable name, text
after the closing parenthesis, and both forms in one reply (FINAL_VAR wins when the
variable exists, since it names an exact value).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlmkit.prompting import ANSWER_NOW, FINISH_PROMPT, NO_SUCH_VARIABLE
from rlmkit.protocols.base import (
    Answer,
    Parsed,
    Protocol,
    ReadVar,
    find_code_blocks,
    finish_with,
    strip_code_blocks,
)

_FINAL_VAR = re.compile(r"FINAL_VAR\(\s*(.*?)\s*\)", re.DOTALL)
_FINAL = re.compile(r"(?<![A-Za-z_])FINAL\((.*)\)", re.DOTALL)

# FINAL_VAR accepts a name (quoted or not) or, by mistake, the value itself.
_PRELUDE = """
def FINAL_VAR(name):
    key = name.strip().strip("'\\"") if isinstance(name, str) else None
    return FINAL(globals()[key] if key in globals() else name)
"""


def _unquote(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    if text.startswith(('"""', "'''")) and text.endswith(('"""', "'''")) and len(text) >= 6:
        return text[3:-3]
    return text


def _balanced_prefix(text: str) -> str:
    """``FINAL(...)`` may be followed by more text: keep what its own parentheses enclose."""
    depth = 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            if depth == 0:
                return text[:i]
            depth -= 1
    return text


@dataclass
class FinalProtocol(Protocol):
    name: str = "final"
    finish_prompt: str = FINISH_PROMPT["final"]
    answer_now: str = ANSWER_NOW["final"]
    prelude: str = _PRELUDE

    def host_functions(self, submit: Callable[[dict[str, Any]], None], fields: list[str]):
        def FINAL(value: Any) -> None:
            outputs = value if isinstance(value, dict) and set(value) == set(fields) else {fields[0]: value}
            finish_with(submit, outputs)

        return {"FINAL": FINAL}

    def parse(self, reply: str) -> Parsed:
        blocks = find_code_blocks(reply)
        prose = strip_code_blocks(reply)
        parsed = Parsed(code_blocks=blocks)
        var = _FINAL_VAR.search(prose)
        if var:
            parsed.final_var = _unquote(var.group(1))
        value = _FINAL.search(prose.replace("FINAL_VAR(", "_VAR("))
        if value:
            parsed.final = _unquote(_balanced_prefix(value.group(1)))
        return parsed

    def answer(
        self, parsed: Parsed, read_var: ReadVar, fields: list[str], *, turn_over: bool
    ) -> Answer | None:
        """After the whole reply ran (its code may compute the variable FINAL_VAR names)."""
        if not turn_over or (parsed.final is None and parsed.final_var is None):
            return None
        if parsed.final_var is not None:
            missing = object()
            value = read_var(parsed.final_var, missing)
            if value is not missing:
                return Answer(outputs={fields[0]: value})
            if parsed.final is None:
                return Answer(problem=NO_SUCH_VARIABLE.format(name=parsed.final_var))
        return Answer(outputs={fields[0]: parsed.final})

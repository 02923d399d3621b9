"""``final``: ``FINAL(value)`` / ``FINAL_VAR(name)``, the convention RLM-Qwen3-8B was trained on.

Both work inside code (as functions) and in the reply's prose. Prose forms tolerate the
templated mistakes seen in practice: quotes around the value or the variable name, text
after the closing parenthesis, and both forms in one reply (FINAL_VAR wins when the
variable exists, since it names an exact value).

Two readers live here: ``parse`` is what the run loop acts on (the first FINAL_VAR and the
first FINAL in prose); the ending grammar (``endings``) finds every marker with where it
stands, for compilers that rewrite replies. The grammar writes the prose form.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from rlmkit.prompting import FINAL_TEXTS, NO_SUCH_VARIABLE
from rlmkit.protocols.base import (
    Answer,
    Parsed,
    Protocol,
    ReadVar,
    find_code_blocks,
    finish_with,
    strip_code_blocks,
)
from rlmkit.protocols.endings import BAD_FINAL_VAR, QUOTES, Ending, Source, Value, Written, one_value

_FINAL_VAR = re.compile(r"FINAL_VAR\(\s*(.*?)\s*\)", re.DOTALL)
_FINAL = re.compile(r"(?<![A-Za-z_])FINAL\((.*)\)", re.DOTALL)
FINAL_VAR_NAME = "final_answer"  # variable written when an expression must become FINAL_VAR

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
    finish_prompt: str = FINAL_TEXTS.finish
    answer_now: str = FINAL_TEXTS.answer_now
    prelude: str = _PRELUDE
    code_words: ClassVar[tuple[str, ...]] = ("FINAL",)
    code_marker: ClassVar[re.Pattern[str]] = re.compile(r"\b(FINAL_VAR|FINAL)\(")
    prose_forms: ClassVar[tuple[str, ...]] = ("FINAL_VAR", "FINAL")

    def host_functions(
        self, submit: Callable[[dict[str, object]], None], fields: list[str]
    ) -> dict[str, Callable[..., object]]:
        def FINAL(value: object) -> None:
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

    def made_a_move(self, parsed: Parsed) -> bool:
        return bool(parsed.code_blocks) or parsed.final is not None or parsed.final_var is not None

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

    # ---------------------------------------------------------------- the ending grammar
    def read_statement(self, node: ast.AST, source: Source) -> Ending | None:
        """FINAL / FINAL_VAR called in code: it works, but the trained convention is prose."""
        if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)):
            return None
        call = node.value
        form = call.func.id if isinstance(call.func, ast.Name) else None
        if form not in ("FINAL", "FINAL_VAR") or len(call.args) != 1 or call.keywords:
            return None
        arg, fixes = call.args[0], ["final_in_code"]
        if form == "FINAL_VAR" and isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            fixes.append("final_var_quoted")
            text = arg.value.strip(QUOTES)
        else:
            text = source.segment(arg)
        if form == "FINAL_VAR" and not text.isidentifier():
            return Ending(self.name, form, fixes=fixes, problem=BAD_FINAL_VAR)
        return Ending(self.name, form, {"": Value(text)}, fixes=fixes)

    def read_prose(self, form: str, inner: str, call: str) -> Ending:
        if form == "FINAL":
            return Ending(self.name, form, {"": Value(inner.strip(), is_text=True)})
        name = inner.strip(QUOTES)
        fixes = ["final_var_quoted"] if name != inner.strip() else []
        problem = None if name.isidentifier() else BAD_FINAL_VAR
        return Ending(self.name, form, {"": Value(name)}, fixes=fixes, problem=problem)

    def write_ending(self, values: dict[str, Value], fields: dict[str, str]) -> Written:
        """A prose line; an expression is first stored in ``FINAL_VAR_NAME`` by a code line."""
        _, value = one_value(self.name, values)
        if value.is_text:
            return Written([], f"FINAL({value.source})")
        if value.source.isidentifier():
            return Written([], f"FINAL_VAR({value.source})")
        try:
            return Written([], f"FINAL({ast.literal_eval(value.source)})")
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return Written([f"{FINAL_VAR_NAME} = {value.source}"], f"FINAL_VAR({FINAL_VAR_NAME})")

    def choose(
        self, endings: list[Ending], outputs: dict[str, object] | None
    ) -> tuple[list[Ending], list[str]]:
        """FINAL and FINAL_VAR both given: FINAL_VAR wins (the run loop reads it first) unless
        FINAL's text is the recorded answer."""
        if {ending.form for ending in endings} != {"FINAL", "FINAL_VAR"}:
            return endings, []
        recorded = {str(value).strip() for value in (outputs or {}).values()}
        literal = [e for e in endings if e.form == "FINAL" and e.values[""].source in recorded]
        return literal or [e for e in endings if e.form == "FINAL_VAR"], ["both_final_forms"]

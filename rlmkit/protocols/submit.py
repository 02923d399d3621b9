"""``submit`` (default): the model calls ``SUBMIT(field=value, ...)`` inside REPL code.

Outputs are validated against the signature's output fields when SUBMIT is called; a type
or missing-field error is raised inside the cell, so the model sees it as the cell's output
and can try again on its next turn. Its ending grammar also reads SUBMIT written in prose or
with positional values (mistakes a compiler fixes); it always writes one keyword call in code.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import ClassVar

from rlmkit.prompting import READY_TO_SUBMIT, SUBMIT_TEXTS
from rlmkit.protocols.base import Answer, Parsed, Protocol, ReadVar, finish_with
from rlmkit.protocols.endings import UNPARSABLE, Ending, Source, Value, Written
from rlmkit.trajectory import bounded


@dataclass
class SubmitProtocol(Protocol):
    name: str = "submit"
    finish_prompt: str = SUBMIT_TEXTS.finish
    answer_now: str = SUBMIT_TEXTS.answer_now
    code_words: ClassVar[tuple[str, ...]] = ("SUBMIT",)
    code_marker: ClassVar[re.Pattern[str]] = re.compile(r"\bSUBMIT\(")
    prose_forms: ClassVar[tuple[str, ...]] = ("SUBMIT",)

    def render_finish(self, output_fields: dict[str, str]) -> str:
        """Show the call with values (``SUBMIT(answer=answer)``): small models copy a rendered
        ``SUBMIT(answer=str)`` literally. The types are in the task message."""
        return self.finish_prompt.format(fields=_values(output_fields), first=next(iter(output_fields)))

    def finish_example(self, output_fields: dict[str, str], variable: str) -> str:
        return f"SUBMIT({_values(output_fields, variable)})"

    def answer(
        self, parsed: Parsed, read_var: ReadVar, fields: list[str], *, turn_over: bool
    ) -> Answer | None:
        """SUBMIT ends a run itself; this only spots a turn that stored every output under its
        field's name (``answer = 1936``) and stopped there: small models then repeat that
        assignment turn after turn. Tell them the one call that finishes."""
        if not turn_over:
            return None
        code = "\n".join(parsed.code_blocks)
        if not any(re.search(rf"^[ \t]*{re.escape(name)}[ \t]*=(?!=)", code, re.M) for name in fields):
            return None
        missing = object()
        values = {name: read_var(name, missing) for name in fields}
        if any(value is missing for value in values.values()):
            return None
        shown = ", ".join(f"{name} = {bounded(repr(value), 200)}" for name, value in values.items())
        names = " and ".join(f"`{name}`" for name in fields)
        call = f"SUBMIT({_values(fields)})"
        return Answer(
            problem=READY_TO_SUBMIT.format(
                names=names, verb="is" if len(fields) == 1 else "are", shown=shown, call=call
            )
        )

    def host_functions(
        self, submit: Callable[[dict[str, object]], None], fields: list[str]
    ) -> dict[str, Callable[..., object]]:
        def SUBMIT(*args: object, **kwargs: object) -> None:
            if args:
                if len(args) > len(fields):
                    raise TypeError(
                        f"SUBMIT takes the output fields {fields}; got {len(args)} positional values"
                    )
                kwargs = {**dict(zip(fields, args)), **kwargs}
            finish_with(submit, kwargs)

        return {"SUBMIT": SUBMIT}

    def read_statement(self, node: ast.AST, source: Source) -> Ending | None:
        if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)):
            return None
        call = node.value
        if not (isinstance(call.func, ast.Name) and call.func.id == "SUBMIT"):
            return None
        values = {kw.arg or "**": Value(source.segment(kw.value)) for kw in call.keywords}
        for position, arg in enumerate(call.args):
            values[f"#{position}"] = Value(source.segment(arg))
        return Ending(self.name, "SUBMIT", values, in_place=True)

    def read_prose(self, form: str, inner: str, call: str) -> Ending:
        """SUBMIT written as prose (it never ran): its arguments are read as Python."""
        try:
            ending = self.read_statement(ast.parse(call).body[0], Source(call))
        except (SyntaxError, IndexError):
            ending = None
        if ending is None:
            return Ending(self.name, form, problem=UNPARSABLE, fixes=["submit_outside_code"])
        ending.in_place = False
        ending.fixes.append("submit_outside_code")
        return ending

    def write_ending(self, values: dict[str, Value], fields: dict[str, str]) -> Written:
        args = ", ".join(f"{name}={value.as_expr(fields.get(name, 'str'))}" for name, value in values.items())
        return Written([f"SUBMIT({args})"])


def _values(fields: Iterable[str], first_value: str | None = None) -> str:
    """``answer=answer, n=n``: each output field passed as the variable of its name (the first
    one as ``first_value`` when given)."""
    first, *rest = fields
    return ", ".join([f"{first}={first_value or first}", *(f"{name}={name}" for name in rest)])

"""How a reply ends a run, read and written by each protocol's own grammar.

A protocol knows its ending markers (``SUBMIT(...)``, ``FINAL(...)``, ``answer["ready"]``):
how to find them in a reply, in code blocks and in prose, and how to write one. The run loop
reads replies with ``Protocol.parse``; the compilers (``optimizers/compile/repair.py``) read
every protocol's markers with ``read_endings`` so that a run in one convention can be written
in another, fixing templated mistakes on the way. This module holds what all grammars share:
the typed records, the walk over a reply, and the hooks a protocol fills in.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

# ```repl is the convention; ```python / ```py are accepted. A last block the model did not
# close (it stopped mid-reply) still counts: the regex's second branch takes it to the end.
# Group 1 is the code. The run loop and the compilers read replies with this one pattern.
CODE_BLOCK = re.compile(r"```(?:repl|python|py)[ \t]*\r?\n(.*?)(?:```|\Z)", re.DOTALL)

QUOTES = "\"'` \t\n"  # what a quoted variable name is stripped of
# Ending.problem values: the marker was seen but could not be read. Each becomes the reason
# ``<protocol>_<problem>`` a compiler gives for dropping the sample.
CODE_DOES_NOT_PARSE = "code_does_not_parse"  # a block mentioning a marker is not valid Python
UNPARSABLE = "unparsable"
UNCLOSED = "unclosed"
BAD_FINAL_VAR = "bad_final_var"


class EndingError(Exception):
    """An ending that cannot be read or written as asked; ``reason`` says why in one word."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Value:
    """One output's value as the reply wrote it."""

    source: str  # a Python expression, or the answer's literal text when ``is_text``
    is_text: bool = False  # FINAL(Paris) in prose: text, not code

    def as_expr(self, type_: str) -> str:
        """The value as Python code for a field of ``type_`` (text becomes a string literal,
        except a literal of a non-str field: FINAL(42) for an int stays 42, not "42")."""
        if not self.is_text:
            return self.source
        if type_.strip() not in ("", "str"):
            try:
                ast.literal_eval(self.source)
                return self.source
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                pass
        return repr(self.source)


@dataclass
class Ending:
    """One ending marker found in a reply, with what it says and where it stands."""

    protocol: str  # whose grammar this marker is
    form: str  # the marker: SUBMIT / FINAL / FINAL_VAR / content / ready
    values: dict[str, Value] = field(default_factory=dict)  # output field ("" unnamed, "#0" positional)
    block: int | None = None  # code block index; None in prose
    span: tuple[int, int] = (0, 0)  # lines in the block (1-based, inclusive), else chars in the reply
    nested: bool = False  # inside an if/for/try: it may not have run, so it cannot be moved
    fixes: list[str] = field(default_factory=list)  # templated mistakes read past, e.g. final_var_quoted
    problem: str | None = None  # seen but unreadable (UNCLOSED, ...): no values
    ends_run: bool = True  # False for a part that only sets values (answer["content"])
    in_place: bool = False  # the protocol's own code form: a rewritten code ending may stand here


@dataclass(frozen=True)
class Written:
    """An ending rendered in a protocol: lines for the last code block, and/or a prose line."""

    code: list[str]
    prose: str = ""


class Grammar:
    """The ending hooks every ``Protocol`` has; a protocol fills in the ones its markers need.

    Reading is split so one walk serves many grammars (a compiler looks for every protocol's
    markers at once, in reply order): the walk parses each block and asks each grammar about
    each statement, and finds prose calls and asks their owner about each.
    """

    name: str
    code_words: ClassVar[tuple[str, ...]] = ()  # a block is parsed only when one is in it
    code_marker: ClassVar[re.Pattern[str] | None] = None  # a block that does not parse but matches is broken
    prose_forms: ClassVar[tuple[str, ...]] = ()  # names whose call ``NAME(...)`` in prose is a marker

    def read_statement(self, node: ast.AST, source: Source) -> Ending | None:
        """The marker a code node is, if any (``block``, ``span``, ``nested`` are set by the walk)."""
        return None

    def read_prose(self, form: str, inner: str, call: str) -> Ending:
        """A prose marker ``form(inner)``; ``call`` is the whole call text."""
        raise NotImplementedError(form)

    def endings(self, reply: str) -> list[Ending]:
        """This protocol's markers in ``reply``, in reply order (code first, then prose)."""
        return read_endings(reply, [self])

    def write_ending(self, values: dict[str, Value], fields: dict[str, str]) -> Written:
        """Render an ending giving ``values`` (by output field; ``fields`` maps names to types)."""
        raise EndingError(f"{self.name}_cannot_write_an_ending")

    def choose(
        self, endings: list[Ending], outputs: dict[str, object] | None
    ) -> tuple[list[Ending], list[str]]:
        """When a reply has several of this protocol's endings: the ones that count, and the fix."""
        return endings, []

    def ending_values(self, chosen: Ending, endings: list[Ending]) -> dict[str, Value]:
        """The values ``chosen`` gives (a marker may take them from the protocol's other parts)."""
        return chosen.values


def read_endings(reply: str, grammars: Sequence[Grammar]) -> list[Ending]:
    """Every marker of ``grammars`` in ``reply``: code blocks in order, then prose in order."""
    blocks = list(CODE_BLOCK.finditer(reply))
    return _code_endings(blocks, grammars) + _prose_endings(reply, blocks, grammars)


def _code_endings(blocks: list[re.Match[str]], grammars: Sequence[Grammar]) -> list[Ending]:
    found: list[Ending] = []
    words = [word for grammar in grammars for word in grammar.code_words]
    for index, match in enumerate(blocks):
        code = match.group(1)
        if not any(word in code for word in words):
            continue
        try:
            tree = ast.parse(code)
        except SyntaxError:
            owner = next((g for g in grammars if g.code_marker and g.code_marker.search(code)), None)
            if owner is not None:  # it never ran; a compiler must know it could not be read
                found.append(Ending(owner.name, "block", block=index, problem=CODE_DOES_NOT_PARSE))
            continue
        source = Source(code)
        top = {id(node) for node in tree.body}
        for node in ast.walk(tree):
            for grammar in grammars:
                ending = grammar.read_statement(node, source)
                if ending is not None and isinstance(node, (ast.stmt, ast.expr)):  # a grammar reads these
                    ending.block, ending.nested = index, id(node) not in top
                    ending.span = (node.lineno, node.end_lineno or node.lineno)
                    found.append(ending)
                    break
    return found


def _prose_endings(reply: str, blocks: list[re.Match[str]], grammars: Sequence[Grammar]) -> list[Ending]:
    owners = {form: grammar for grammar in grammars for form in grammar.prose_forms}
    if not owners:
        return []
    names = "|".join(re.escape(form) for form in sorted(owners, key=len, reverse=True))
    # anywhere in prose, as the final protocol reads it (not only at the start of a line)
    pattern = re.compile(rf"(?<![A-Za-z0-9_])({names})\(")
    inside = [(m.start(), m.end()) for m in blocks]
    found: list[Ending] = []
    for match in pattern.finditer(reply):
        if any(start <= match.start() < end for start, end in inside):
            continue
        form, open_at = match.group(1), match.end()
        owner = owners[form]
        close = closing_paren(reply, open_at)
        if close is None:  # unbalanced text inside FINAL(...): take the last ")" as the run loop does
            close = reply.rfind(")", open_at)
            if close < 0:
                found.append(Ending(owner.name, form, span=(match.start(), len(reply)), problem=UNCLOSED))
                continue
        line_end = reply.find("\n", close)
        line_end = len(reply) if line_end < 0 else line_end
        ending = owner.read_prose(form, reply[open_at:close], reply[match.start() : close + 1].strip())
        ending.block, ending.span = None, (match.start(), line_end)
        trailing = ["final_trailing_text"] if reply[close + 1 : line_end].strip() else []
        ending.fixes = trailing + ending.fixes
        found.append(ending)
    return found


def closing_paren(text: str, start: int) -> int | None:
    """Where the parenthesis open before ``start`` closes, or None."""
    depth = 1
    for position in range(start, len(text)):
        char = text[position]
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return position
    return None


class Source:
    """Source text of AST nodes; ``ast.get_source_segment`` re-splits the code on every call."""

    def __init__(self, code: str):
        self.lines = code.encode("utf-8").splitlines(keepends=True)  # ast offsets are UTF-8 bytes

    def segment(self, node: ast.stmt | ast.expr) -> str:
        first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
        if first == last:
            return self.lines[first][node.col_offset : node.end_col_offset].decode("utf-8")
        parts = [
            self.lines[first][node.col_offset :],
            *self.lines[first + 1 : last],
            self.lines[last][: node.end_col_offset],
        ]
        return b"".join(parts).decode("utf-8")


def field_values(values: dict[str, Value], fields: dict[str, str], fixes: list[str]) -> dict[str, Value]:
    """An ending's values by the signature's output fields (an unnamed or positional value
    goes to the only field; a positional one is a fix)."""
    names = list(fields)
    unnamed = [key for key in values if key == "" or key.startswith("#")]
    named = {key: value for key, value in values.items() if key not in unnamed}
    if "**" in named:
        raise EndingError("submit_with_star_arguments")
    if unnamed:
        if len(unnamed) != 1 or named or len(names) != 1:
            raise EndingError("cannot_map_answer_to_output_fields")
        if unnamed[0].startswith("#"):
            fixes.append("submit_positional")
        return {names[0]: values[unnamed[0]]}
    if set(named) != set(names):
        raise EndingError("submit_fields_differ_from_signature")
    return {name: named[name] for name in names}


def one_value(protocol: str, values: dict[str, Value]) -> tuple[str, Value]:
    """The single (field, value) of a protocol that carries one answer."""
    if len(values) != 1:
        raise EndingError(f"{protocol}_protocol_carries_one_answer")
    return next(iter(values.items()))

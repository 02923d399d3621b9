"""Protocol repair: read how a reply ends a run, fix templated mistakes, write it in a target protocol.

The three ways a run ends (see ``rlmkit.protocols``):
- ``submit``: ``SUBMIT(answer=...)`` called inside a ```repl block;
- ``final``: a line ``FINAL(text)`` or ``FINAL_VAR(name)`` outside code, after the code ran;
- ``answer``: ``answer["content"] = ...`` and ``answer["ready"] = True`` inside code.

Every marker of every protocol is looked for, so a reply in one convention can be re-written
in another, and the usual mistakes are fixed on the way: a quoted ``FINAL_VAR("name")``, text
after ``FINAL(...)``, FINAL and FINAL_VAR both in one reply, FINAL inside a code block,
SUBMIT in prose or with a positional argument, several endings in one reply. What cannot be
mapped safely raises ``Unrepairable`` with a short reason, and the sample is dropped.
A reply that needs no change is returned byte for byte.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from rlmkit.protocols import CODE_BLOCK
from rlmkit.protocols import PROTOCOLS as _REGISTRY

PROTOCOLS = tuple(_REGISTRY)  # submit, final, answer
FINAL_VAR_NAME = "final_answer"  # variable created when an expression must become FINAL_VAR

# rlmkit's own fences; group 1 is the code, an unclosed last block runs to the end
_CODE_BLOCK = CODE_BLOCK
# anywhere in prose, as rlmkit's final protocol reads it (not only at the start of a line)
_PROSE_MARKER = re.compile(r"(?<![A-Za-z0-9_])(FINAL_VAR|FINAL|SUBMIT)\(")
_QUOTES = "\"'` \t\n"


class Unrepairable(Exception):
    """The reply's ending cannot be mapped to the target protocol; ``reason`` says why."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass
class Value:
    source: str  # a Python expression, or literal answer text when ``is_text``
    is_text: bool = False


@dataclass
class _Marker:
    protocol: str  # which protocol's syntax this marker is
    name: str  # SUBMIT / FINAL / FINAL_VAR / content / ready
    values: dict[str, Value]  # output field ("" = unnamed) -> value
    block: int | None  # code block index, None in prose
    span: tuple[int, int]  # line range in the block (1-based, inclusive) or char span in the reply
    nested: bool = False  # inside an if/for/try: cannot be moved safely
    fixes: list[str] = field(default_factory=list)


@dataclass
class RepairResult:
    reply: str
    fixes: list[str]  # what was changed, e.g. ["final_var_quoted", "converted:final->submit"]


def repair_reply(
    reply: str,
    *,
    source: str,
    target: str,
    fields: dict[str, str],
    final: bool,
    outputs: dict[str, Any] | None = None,
) -> RepairResult:
    """Normalise the ending of ``reply`` (a turn of a ``source`` protocol run) to ``target``."""
    if target not in PROTOCOLS:
        raise ValueError(f"unknown target protocol {target!r}; known: {PROTOCOLS}")
    blocks = list(_CODE_BLOCK.finditer(reply))
    markers = _code_markers(reply, blocks) + _prose_markers(reply, blocks)
    if any(m.name == "broken_block" for m in markers):
        if target != source:  # a broken block's markers could not be rewritten
            raise Unrepairable(f"{source}_code_does_not_parse")
        markers = [m for m in markers if m.name != "broken_block"]  # it never ran: not how the run ended
    if not final:
        if markers and target != source:
            raise Unrepairable("ending_in_non_final_turn")
        return RepairResult(reply, [])  # what the model really did on its way to the answer
    if not markers:
        if target != source:
            raise Unrepairable("no_ending_found")
        return RepairResult(reply, [])
    ending, fixes = _choose_ending(markers, source, fields, outputs)
    if target == source and not fixes:
        return RepairResult(reply, [])
    if target != source:
        fixes.append(f"converted:{source}->{target}")
    return RepairResult(_rebuild(reply, blocks, markers, ending, target, fields), fixes)


# ------------------------------------------------------------------ finding markers
def _code_markers(reply: str, blocks: list[re.Match]) -> list[_Marker]:
    markers: list[_Marker] = []
    for index, match in enumerate(blocks):
        code = match.group(1)
        if not any(word in code for word in ("SUBMIT", "FINAL", "answer[")):
            continue
        try:
            tree = ast.parse(code)
        except SyntaxError:
            if re.search(r"\b(SUBMIT|FINAL_VAR|FINAL)\(|answer\[", code):
                markers.append(_Marker("?", "broken_block", {}, index, (0, 0)))
            continue
        source = _Source(code)
        top = {id(node) for node in tree.body}
        for node in ast.walk(tree):
            marker = _statement_marker(node, source)
            if marker is not None:
                marker.block, marker.nested = index, id(node) not in top
                marker.span = (node.lineno, node.end_lineno or node.lineno)
                markers.append(marker)
    return markers


class _Source:
    """Source text of AST nodes; ``ast.get_source_segment`` re-splits the code on every call."""

    def __init__(self, code: str):
        self.lines = code.encode("utf-8").splitlines(keepends=True)  # ast offsets are UTF-8 bytes

    def segment(self, node: ast.AST) -> str:
        first, last = node.lineno - 1, node.end_lineno - 1
        if first == last:
            return self.lines[first][node.col_offset : node.end_col_offset].decode("utf-8")
        parts = [
            self.lines[first][node.col_offset :],
            *self.lines[first + 1 : last],
            self.lines[last][: node.end_col_offset],
        ]
        return b"".join(parts).decode("utf-8")


def _statement_marker(node: ast.AST, source: _Source) -> _Marker | None:
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        call = node.value
        name = call.func.id if isinstance(call.func, ast.Name) else None
        if name == "SUBMIT":
            values = {kw.arg or "**": Value(source.segment(kw.value)) for kw in call.keywords}
            for position, arg in enumerate(call.args):
                values[f"#{position}"] = Value(source.segment(arg))
            return _Marker("submit", "SUBMIT", values, None, (0, 0))
        if name in ("FINAL", "FINAL_VAR") and len(call.args) == 1 and not call.keywords:
            arg = call.args[0]
            fixes = ["final_in_code"]
            if name == "FINAL_VAR" and isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                fixes.append("final_var_quoted")
                text = arg.value.strip(_QUOTES)
            else:
                text = source.segment(arg)
            if name == "FINAL_VAR" and not text.isidentifier():
                return _Marker("final", "bad_final_var", {}, None, (0, 0), fixes=fixes)
            return _Marker("final", name, {"": Value(text)}, None, (0, 0), fixes=fixes)
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        key = _answer_key(node.targets[0])
        if key == "content":
            return _Marker("answer", "content", {"": Value(source.segment(node.value))}, None, (0, 0))
        if key == "ready" and isinstance(node.value, ast.Constant) and node.value.value is True:
            return _Marker("answer", "ready", {}, None, (0, 0))
    return None


def _answer_key(target: ast.AST) -> str | None:
    if (
        isinstance(target, ast.Subscript)
        and isinstance(target.value, ast.Name)
        and target.value.id == "answer"
        and isinstance(target.slice, ast.Constant)
    ):
        return str(target.slice.value)
    return None


def _prose_markers(reply: str, blocks: list[re.Match]) -> list[_Marker]:
    inside = [(m.start(), m.end()) for m in blocks]
    markers: list[_Marker] = []
    for match in _PROSE_MARKER.finditer(reply):
        if any(start <= match.start() < end for start, end in inside):
            continue
        name, open_at = match.group(1), match.end()
        close = _closing_paren(reply, open_at)
        if close is None:  # unbalanced text inside FINAL(...): take the last ")" as the reference parser does
            close = reply.rfind(")", open_at)
            if close < 0:
                protocol = "submit" if name == "SUBMIT" else "final"
                markers.append(_Marker(protocol, "unclosed", {}, None, (match.start(), len(reply))))
                continue
        inner = reply[open_at:close]
        line_end = reply.find("\n", close)
        line_end = len(reply) if line_end < 0 else line_end
        fixes = ["final_trailing_text"] if reply[close + 1 : line_end].strip() else []
        span = (match.start(), line_end)
        if name == "FINAL":
            markers.append(
                _Marker("final", name, {"": Value(inner.strip(), is_text=True)}, None, span, fixes=fixes)
            )
        elif name == "FINAL_VAR":
            var = inner.strip(_QUOTES)
            if var != inner.strip():
                fixes.append("final_var_quoted")
            kind = name if var.isidentifier() else "bad_final_var"
            markers.append(_Marker("final", kind, {"": Value(var)}, None, span, fixes=fixes))
        else:  # SUBMIT written as prose: parse its arguments as Python
            marker = _prose_submit(reply[match.start() : close + 1].strip(), span)
            marker.fixes += fixes + ["submit_outside_code"]
            markers.append(marker)
    return markers


def _prose_submit(text: str, span: tuple[int, int]) -> _Marker:
    try:
        node = ast.parse(text).body[0]
    except (SyntaxError, IndexError):
        return _Marker("submit", "unparsable", {}, None, span)
    marker = _statement_marker(node, _Source(text)) or _Marker("submit", "unparsable", {}, None, span)
    marker.span = span
    return marker


def _closing_paren(text: str, start: int) -> int | None:
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


# ------------------------------------------------------------------ choosing the ending
def _choose_ending(
    markers: list[_Marker], source: str, fields: dict[str, str], outputs: dict[str, Any] | None
) -> tuple[dict[str, Value], list[str]]:
    for marker in markers:
        if marker.name in ("unparsable", "unclosed", "bad_final_var"):
            raise Unrepairable(f"{marker.protocol}_{marker.name}")
    fixes = [fix for marker in markers for fix in marker.fixes]
    endings = [m for m in markers if m.name != "content"]
    kinds = {m.protocol for m in endings}
    if len(kinds) > 1:  # markers of two protocols: the run's own protocol decided how it ended
        fixes.append("mixed_protocol_markers")
        endings = [m for m in endings if m.protocol == source] or endings
    if {m.name for m in endings} == {"FINAL", "FINAL_VAR"}:
        fixes.append("both_final_forms")
        endings = _pick_final_form(endings, outputs)
    if len(endings) > 1:
        fixes.append("multiple_endings")  # the first one ended the cell; later ones never ran
    chosen = endings[0]
    if chosen.nested:
        raise Unrepairable("ending_inside_nested_block")
    if chosen.name == "ready":
        content = [m for m in markers if m.name == "content" and m.block is not None and not m.nested]
        if not content:
            raise Unrepairable("answer_content_set_in_earlier_turn")
        return _named(content[-1].values, fields, fixes), fixes
    return _named(chosen.values, fields, fixes), fixes


def _pick_final_form(endings: list[_Marker], outputs: dict[str, Any] | None) -> list[_Marker]:
    """FINAL_VAR wins (the reference parser reads it first) unless FINAL's text is the recorded answer."""
    recorded = {str(value).strip() for value in (outputs or {}).values()}
    literal = [m for m in endings if m.name == "FINAL" and m.values[""].source in recorded]
    return literal or [m for m in endings if m.name == "FINAL_VAR"]


def _named(values: dict[str, Value], fields: dict[str, str], fixes: list[str]) -> dict[str, Value]:
    """Map a marker's values onto the signature's output fields."""
    names = list(fields)
    unnamed = [key for key in values if key == "" or key.startswith("#")]
    named = {key: value for key, value in values.items() if key not in unnamed}
    if "**" in named:
        raise Unrepairable("submit_with_star_arguments")
    if unnamed:
        if len(unnamed) != 1 or named or len(names) != 1:
            raise Unrepairable("cannot_map_answer_to_output_fields")
        if unnamed[0].startswith("#"):
            fixes.append("submit_positional")
        return {names[0]: values[unnamed[0]]}
    if set(named) != set(names):
        raise Unrepairable("submit_fields_differ_from_signature")
    return {name: named[name] for name in names}


# ------------------------------------------------------------------ writing the target
def _rebuild(
    reply: str,
    blocks: list[re.Match],
    markers: list[_Marker],
    ending: dict[str, Value],
    target: str,
    fields: dict[str, str],
) -> str:
    """Cut every marker out of the reply, then write ``ending`` the way ``target`` ends a run.

    Code lines go where the old ending stood when it was code (statements after it never
    ran before either), else at the end of the last block; a FINAL line goes last.
    """
    code_lines, prose_line = _render(ending, target, fields)
    anchor = next((m for m in markers if m.block is not None and m.name in ("SUBMIT", "ready")), None)
    drop: dict[int, set[int]] = {}
    for marker in markers:
        if marker.block is not None:
            drop.setdefault(marker.block, set()).update(range(marker.span[0], marker.span[1] + 1))
    prose_cuts = sorted(m.span for m in markers if m.block is None)
    new_blocks: list[list[str]] = []
    for index, match in enumerate(blocks):
        kept: list[str] = []
        for number, line in enumerate(match.group(1).split("\n"), 1):
            if anchor is not None and anchor.block == index and number == anchor.span[0]:
                kept.extend(code_lines)
            if number not in drop.get(index, set()):
                kept.append(line)
        new_blocks.append(kept)
    if code_lines and anchor is None and new_blocks:
        last = new_blocks[-1]
        while last and not last[-1].strip():
            last.pop()
        last.extend(code_lines)
    parts: list[str] = []
    position = 0
    for index, match in enumerate(blocks):
        parts.append(_cut(reply[position : match.start()], prose_cuts, position))
        code = "\n".join(new_blocks[index]).strip("\n")
        if code.strip():  # a block that held only the old ending goes away with it
            parts.append("```repl\n" + code + "\n```")
        position = match.end()
    parts.append(_cut(reply[position:], prose_cuts, position))
    text = "".join(parts).strip()
    if code_lines and not blocks:
        text = (text + "\n\n" if text else "") + "```repl\n" + "\n".join(code_lines) + "\n```"
    if prose_line:
        text = f"{text}\n{prose_line}" if text else prose_line
    return text


def _cut(text: str, cuts: list[tuple[int, int]], offset: int) -> str:
    for start, end in reversed(cuts):
        start, end = start - offset, end - offset
        if 0 <= start < len(text):
            text = text[:start] + text[min(end + 1, len(text)) :]
    return text


def _render(ending: dict[str, Value], target: str, fields: dict[str, str]) -> tuple[list[str], str]:
    """(lines to add at the end of the last code block, a line to add after the reply)."""
    if target == "submit":
        args = ", ".join(
            f"{name}={_as_expr(value, fields.get(name, 'str'))}" for name, value in ending.items()
        )
        return [f"SUBMIT({args})"], ""
    if len(ending) != 1:
        raise Unrepairable(f"{target}_protocol_carries_one_answer")
    name, value = next(iter(ending.items()))
    if target == "answer":
        return [
            f'answer["content"] = {_as_expr(value, fields.get(name, "str"))}',
            'answer["ready"] = True',
        ], ""
    if value.is_text:
        return [], f"FINAL({value.source})"
    if value.source.isidentifier():
        return [], f"FINAL_VAR({value.source})"
    try:
        return [], f"FINAL({ast.literal_eval(value.source)})"
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return [f"{FINAL_VAR_NAME} = {value.source}"], f"FINAL_VAR({FINAL_VAR_NAME})"


def _as_expr(value: Value, type_: str) -> str:
    if not value.is_text:
        return value.source
    text = value.source
    if type_.strip() not in ("", "str"):
        try:
            ast.literal_eval(text)
            return text  # FINAL(42) for an int field stays 42, not "42"
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            pass
    return repr(text)

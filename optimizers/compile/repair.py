"""Protocol repair: read how a reply ends a run, fix templated mistakes, write it in a target protocol.

The three ways a run ends (see ``rlmkit.protocols``):
- ``submit``: ``SUBMIT(answer=...)`` called inside a ```repl block;
- ``final``: a line ``FINAL(text)`` or ``FINAL_VAR(name)`` outside code, after the code ran;
- ``answer``: ``answer["content"] = ...`` and ``answer["ready"] = True`` inside code.

Each protocol owns its grammar (``rlmkit.protocols.endings``: how its markers are found and
written); this module only decides across protocols. Every marker of every protocol is looked
for, so a reply in one convention can be re-written in another, and the usual mistakes are
fixed on the way: a quoted ``FINAL_VAR("name")``, text
after ``FINAL(...)``, FINAL and FINAL_VAR both in one reply, FINAL inside a code block,
SUBMIT in prose or with a positional argument, several endings in one reply. What cannot be
mapped safely raises ``Unrepairable`` with a short reason, and the sample is dropped.
A reply that needs no change is returned byte for byte.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from rlmkit.protocols import PROTOCOLS as _REGISTRY
from rlmkit.protocols import get_protocol
from rlmkit.protocols.endings import (
    CODE_BLOCK,
    CODE_DOES_NOT_PARSE,
    Ending,
    EndingError,
    Value,
    field_values,
    read_endings,
)

PROTOCOLS = tuple(_REGISTRY)  # submit, final, answer
# every protocol's grammar (stateless), to read any protocol's markers and write the target's
_GRAMMARS = {name: get_protocol(name) for name in PROTOCOLS}


class Unrepairable(EndingError):
    """The reply's ending cannot be mapped to the target protocol; ``reason`` says why."""


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
    try:
        return _repair(reply, source, target, fields, final, outputs)
    except Unrepairable:
        raise
    except EndingError as exc:  # a protocol's grammar could not read or write the ending
        raise Unrepairable(exc.reason) from exc


def _repair(
    reply: str, source: str, target: str, fields: dict[str, str], final: bool, outputs: dict[str, Any] | None
) -> RepairResult:
    blocks = list(CODE_BLOCK.finditer(reply))
    markers = read_endings(reply, list(_GRAMMARS.values()))
    if any(m.problem == CODE_DOES_NOT_PARSE for m in markers):
        if target != source:  # a broken block's markers could not be rewritten
            raise Unrepairable(f"{source}_{CODE_DOES_NOT_PARSE}")
        markers = [m for m in markers if m.problem != CODE_DOES_NOT_PARSE]  # it never ran: not how it ended
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
    written = _GRAMMARS[target].write_ending(ending, fields)
    return RepairResult(_rebuild(reply, blocks, markers, written.code, written.prose), fixes)


# ------------------------------------------------------------------ choosing the ending
def _choose_ending(
    markers: list[Ending], source: str, fields: dict[str, str], outputs: dict[str, Any] | None
) -> tuple[dict[str, Value], list[str]]:
    for marker in markers:
        if marker.problem is not None:
            raise Unrepairable(f"{marker.protocol}_{marker.problem}")
    fixes = [fix for marker in markers for fix in marker.fixes]
    endings = [m for m in markers if m.ends_run]
    if not endings:  # only values set (answer["content"]) and nothing that ends the run
        raise Unrepairable("no_ending_found")
    kinds = {m.protocol for m in endings}
    if len(kinds) > 1:  # markers of two protocols: the run's own protocol decided how it ended
        fixes.append("mixed_protocol_markers")
        endings = [m for m in endings if m.protocol == source] or endings
    if len({m.protocol for m in endings}) == 1:  # several endings of one protocol: its own rule
        endings, chosen_fixes = _GRAMMARS[endings[0].protocol].choose(endings, outputs)
        fixes += chosen_fixes
    if len(endings) > 1:
        fixes.append("multiple_endings")  # the first one ended the cell; later ones never ran
    chosen = endings[0]
    if chosen.nested:
        raise Unrepairable("ending_inside_nested_block")
    values = _GRAMMARS[chosen.protocol].ending_values(chosen, markers)
    return field_values(values, fields, fixes), fixes


# ------------------------------------------------------------------ writing the target
def _rebuild(
    reply: str, blocks: list[re.Match], markers: list[Ending], code_lines: list[str], prose_line: str
) -> str:
    """Cut every marker out of the reply, then add the target's ending (``code_lines``, ``prose_line``).

    Code lines go where the old ending stood when it was the protocol's own code form
    (statements after it never ran before either), else at the end of the last block; a
    prose line goes last.
    """
    anchor = next((m for m in markers if m.block is not None and m.in_place), None)
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

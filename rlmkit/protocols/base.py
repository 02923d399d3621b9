"""What every protocol shares: finding code in a reply, and the ``Protocol`` interface.

A protocol is a small object: the prompt text that tells the model how to finish, the
host functions and prelude it adds to the REPL, ``answer()`` (the one rule for how a turn
ends: the answer it found, if any), the one-time "answer now" request sent at
``max_iterations``, and its ending grammar (``endings()`` / ``write_ending()``, from
``rlmkit.protocols.endings``). Every text the model reads lives in ``rlmkit.prompting``;
each protocol holds its own texts as attributes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rlmkit.errors import Finish
from rlmkit.prompting import ANSWER_NOW as ANSWER_NOW  # re-exported: protocols speak these texts
from rlmkit.prompting import FUNCTION_DOCS as FUNCTION_DOCS
from rlmkit.prompting import REPL_PROMPT as REPL_PROMPT
from rlmkit.protocols.endings import CODE_BLOCK as CODE_BLOCK  # re-exported: the package's way in
from rlmkit.protocols.endings import Grammar

# A code block's closing fence. An opening fence is "```repl", so a stop at this string cuts a
# reply right after its first block (``blocks_per_turn=1``); the parser still takes that block.
BLOCK_END = "\n```\n"


def find_code_blocks(reply: str) -> list[str]:
    return [block.strip("\n") for block in CODE_BLOCK.findall(reply or "") if block.strip()]


def strip_code_blocks(reply: str) -> str:
    """The reply's prose: everything outside code blocks."""
    return CODE_BLOCK.sub("", reply or "")


@dataclass
class Parsed:
    code_blocks: list[str]
    final: str | None = None  # FINAL(value) outside code: the answer's text (final protocol)
    final_var: str | None = None  # FINAL_VAR(name) outside code: read ``name`` from the REPL


@dataclass
class Answer:
    """What ``Protocol.answer`` found: outputs to validate, or what is wrong with the attempt."""

    outputs: dict[str, object] | None = None
    problem: str | None = None  # told to the model; no outputs were submitted


# Reads a REPL variable: read_var(name, default) -> its value, or default when there is none.
ReadVar = Callable[[str, object], object]


@dataclass
class Protocol(Grammar):
    """Base class; subclasses fill ``name``, ``finish_prompt`` and the hooks (the ending
    grammar's among them, see ``Grammar``)."""

    name: str = "base"
    finish_prompt: str = ""  # how to end a run; an optimizable parameter
    answer_now: str = ANSWER_NOW
    prelude: str = ""
    # Where a root reply is cut off. Our feedback starts with "REPL output:", so a model that
    # writes it is inventing the output of its own code; nothing after it is worth running.
    stop: tuple[str, ...] = ("REPL output:",)

    def render_finish(self, output_fields: dict[str, str]) -> str:
        fields = ", ".join(f"{name} ({type_})" for name, type_ in output_fields.items())
        return self.finish_prompt.format(fields=fields, first=next(iter(output_fields)))

    def finish_example(self, output_fields: dict[str, str], variable: str) -> str:
        """How to finish with the value in ``variable``, as the prompt's last worked move."""
        return f"FINAL_VAR({variable})"

    def host_functions(
        self, submit: Callable[[dict[str, object]], None], fields: list[str]
    ) -> dict[str, Callable[..., object]]:
        """Functions the protocol adds to the REPL. ``submit(outputs)`` validates the outputs."""
        return {}

    def parse(self, reply: str) -> Parsed:
        return Parsed(code_blocks=find_code_blocks(reply))

    def made_a_move(self, parsed: Parsed) -> bool:
        """Whether the reply did anything this protocol runs (code, or a prose ending); a reply
        that did not is told how to write code."""
        return bool(parsed.code_blocks)

    def answer(
        self, parsed: Parsed, read_var: ReadVar, fields: list[str], *, turn_over: bool
    ) -> Answer | None:
        """How a turn ends: the answer found after a cell (``turn_over=False``) or after the
        whole reply ran (``True``), else None. Answers given by calling a host function
        (``SUBMIT``, ``FINAL``) arrive through ``host_functions``'s ``submit`` instead."""
        return None


def finish_with(submit: Callable[[dict[str, object]], None], outputs: dict[str, object]) -> None:
    """Validate through ``submit`` (which raises on bad outputs) then end the cell."""
    submit(outputs)
    raise Finish(outputs)

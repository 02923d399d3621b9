"""What every protocol shares: finding code in a reply, and the REPL's own prompt text.

A protocol is a small object: the prompt text that tells the model how to finish, the
host functions and prelude it adds to the REPL, how it reads a final answer out of a reply
or the REPL, and the one-time "answer now" request sent at ``max_iterations``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

from rlmkit.errors import Finish

# ```repl is the convention; ```python / ```py are accepted. A last block the model did not
# close (it stopped mid-reply) still counts: the regex's second branch takes it to the end.
_CODE_BLOCK = re.compile(r"```(?:repl|python|py)[ \t]*\r?\n(.*?)(?:```|\Z)", re.DOTALL)


def find_code_blocks(reply: str) -> list[str]:
    return [block.strip("\n") for block in _CODE_BLOCK.findall(reply or "") if block.strip()]


def strip_code_blocks(reply: str) -> str:
    """The reply's prose: everything outside code blocks."""
    return _CODE_BLOCK.sub("", reply or "")


@dataclass
class Parsed:
    code_blocks: list[str]
    final: dict[str, Any] | None = None  # an answer given outside code (final protocol)
    final_var: str | None = None  # FINAL_VAR(name) outside code: read ``name`` from the REPL


REPL_PROMPT = """You are the root of a Recursive Language Model. You answer by writing Python code that \
runs in a persistent REPL. The inputs are already loaded there as variables; they may be far too long \
to read at once, so inspect them with code (len, slicing, regex, splitting) and delegate reading of \
chunks to sub-models through the functions below. Variables persist between your turns.

Write code in fenced blocks that start with ```repl and end with ```. All blocks in a reply run in \
order, and you see their printed output in the next message (long output is cut, so print summaries, \
not whole chunks). Use print() to see values.

Functions available in the REPL:
{functions}
{finish}"""

FUNCTION_DOCS = {
    "llm_query": "llm_query(prompt: str) -> str: ask a sub-model one question; it sees only `prompt` "
    "(include the text it must read). It can handle about {sub_chars} characters.",
    "llm_query_batched": "llm_query_batched(prompts: list[str]) -> list[str]: many llm_query calls run "
    "concurrently; a failed item comes back as a string starting with 'Error:'.",
    "rlm_query": "rlm_query(prompt: str, context=None) -> str: a child RLM with its own REPL answers "
    "`prompt` over `context` (any size).",
    "rlm_query_batched": "rlm_query_batched(prompts: list[str], contexts: list | None = None) -> list[str]: "
    "many rlm_query calls run concurrently.",
    "SHOW_VARS": "SHOW_VARS() -> None: print the REPL's variables with their types and sizes.",
}


@dataclass
class Protocol:
    """Base class; subclasses fill ``name``, ``finish_prompt`` and the hooks."""

    name: str = "base"
    finish_prompt: str = ""  # how to end a run; an optimizable parameter
    answer_now: str = "You are out of turns. Give your final answer now."
    prelude: str = ""
    # Where a root reply is cut off. Our feedback starts with "REPL output:", so a model that
    # writes it is inventing the output of its own code; nothing after it is worth running.
    stop: tuple[str, ...] = ("REPL output:",)
    extra: dict[str, Any] = field(default_factory=dict)

    def render_finish(self, output_fields: dict[str, str]) -> str:
        fields = ", ".join(f"{name} ({type_})" for name, type_ in output_fields.items())
        return self.finish_prompt.format(fields=fields, first=next(iter(output_fields)))

    def host_functions(
        self, submit: Callable[[dict[str, Any]], None], fields: list[str]
    ) -> dict[str, Callable[..., Any]]:
        """Functions the protocol adds to the REPL. ``submit(outputs)`` validates the outputs."""
        return {}

    def parse(self, reply: str) -> Parsed:
        return Parsed(code_blocks=find_code_blocks(reply))

    def after_cell(self, read_var: Callable[[str], Any], fields: list[str]) -> dict[str, Any] | None:
        """Look in the REPL for an answer after a cell (the ``answer`` protocol's dict)."""
        return None


def finish_with(submit: Callable[[dict[str, Any]], None], outputs: dict[str, Any]) -> None:
    """Validate through ``submit`` (which raises on bad outputs) then end the cell."""
    submit(outputs)
    raise Finish(outputs)

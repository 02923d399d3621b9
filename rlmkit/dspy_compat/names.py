"""The names dspy.RLM checks when it is built, checked the same way, with the same error types
and wording (DSPy users match on them), before any model call or sandbox start.

The REPL owns some names (its functions, ``print``); a prediction owns ``trajectory`` and
``final_reasoning``. A tool or input that took one of them would silently replace it in the REPL
or be lost in the result, so it is refused with the field and the fix named.
"""

from __future__ import annotations

import keyword
from collections.abc import Iterable

from rlmkit.run.typed_subcalls import REPL_FUNCTIONS

# Functions the REPL provides (rlmkit's and dspy's spellings) and builtins it relies on.
REPL_NAMES = REPL_FUNCTIONS | {"print"}
# What an input may not be called: the functions every protocol's REPL has, and print.
INPUT_RESERVED = frozenset(
    {"llm_query", "llm_query_batched", "rlm_query", "rlm_query_batched", "SUBMIT", "print"}
)
RESULT_NAMES = frozenset({"trajectory", "final_reasoning"})
RUNTIME_KEYWORDS = frozenset({"interpreter_factory"})  # call-time options, never inputs


def check_tool_names(names: Iterable[str]) -> None:
    for name in names:
        if not name.isidentifier() or keyword.iskeyword(name):
            raise ValueError(
                f"Invalid tool name '{name}': must be a valid Python identifier and not a keyword "
                "(give the tool another name: dspy.Tool(fn, name=...))"
            )
        if name in REPL_NAMES:
            raise ValueError(
                f"Tool name '{name}' conflicts with built-in sandbox function "
                "(rename the tool: dspy.Tool(fn, name=...))"
            )


def check_field_names(inputs: Iterable[str], outputs: Iterable[str], tools: Iterable[str]) -> None:
    inputs, tools = set(inputs), set(tools)
    if RUNTIME_KEYWORDS & inputs:
        raise ValueError(
            "'interpreter_factory' is reserved for RLM runtime configuration, not a signature input."
        )
    if reserved := sorted(inputs & INPUT_RESERVED):
        raise ValueError(
            f"Input fields conflict with built-in sandbox functions: {reserved} (rename the input field)"
        )
    if shadowed := sorted(inputs & tools):
        raise ValueError(f"Input fields conflict with user tools: {shadowed} (rename the input or the tool)")
    if taken := sorted(set(outputs) & RESULT_NAMES):
        raise ValueError(
            f"Output fields conflict with RLM result metadata: {taken} (rename the output field)"
        )

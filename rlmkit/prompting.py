"""The root's prompt: system message (REPL, functions, how to finish, instructions, demos) and
the first user message (the inputs as REPL variables, the outputs wanted).

Inputs appear as type, size and a head/tail preview; short ones in full. The body of a long
input never enters a prompt.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlmkit.protocols.base import REPL_PROMPT, Protocol
from rlmkit.signature import describe_outputs
from rlmkit.trajectory import bounded


@dataclass
class Display:
    """How much of what the model sees, and what the trajectory keeps."""

    full_input_chars: int = 1_000  # inputs up to this size are shown in full
    preview_chars: int = 500  # head + tail preview of longer inputs
    max_output_chars: int = 10_000  # REPL output shown to the model per turn (head + tail)
    trajectory_chars: int = 20_000  # bounded copies of outputs / prompts in the trajectory
    sub_model_chars: int = 100_000  # what the prompt tells the model a sub-call can read
    demo_chars: int = 2_000  # each demo field is cut to this size


def describe_input(name: str, value: Any, display: Display) -> str:
    if isinstance(value, str):
        kind, size = "str", f"{len(value):,} characters"
        text = value
    elif isinstance(value, (list, tuple, dict)):
        kind = type(value).__name__
        size = f"{len(value):,} items"
        text = repr(value) if len(value) < 200 else repr(value[:5] if not isinstance(value, dict) else dict(list(value.items())[:5]))
    else:
        kind, text = type(value).__name__, repr(value)
        size = f"{len(text):,} characters as text"
    if len(text) <= display.full_input_chars:
        return f"- `{name}` ({kind}, {size}): {text!r}" if isinstance(value, str) else f"- `{name}` ({kind}, {size}): {text}"
    half = display.preview_chars // 2
    return f"- `{name}` ({kind}, {size}). Preview: {text[:half]!r} ... {text[-half:]!r}"


def render_demos(demos: list[Any], display: Display) -> str:
    if not demos:
        return ""
    parts = []
    for i, demo in enumerate(demos, 1):
        items = demo.items() if hasattr(demo, "items") else dict(demo).items()
        fields = "\n".join(
            f"{key}: {bounded(str(value), display.demo_chars)}" for key, value in items if not str(key).startswith("_")
        )
        parts.append(f"Example {i}:\n{fields}")
    return "\n\nWorked examples:\n" + "\n\n".join(parts)


# Generic moves, shown on every task: a small model imitates what it is shown, so show it the
# moves (look, search, compute, delegate) and the habits that keep it honest. Task-agnostic on
# purpose: no example computes any suite's answer.
REPL_MOVES = """How to work, one small step per turn (examples; use your own input names and patterns):
1. Look at a little of the data first:
```repl
print(type(context), len(context))
lines = context.splitlines()
print(len(lines)); print(lines[:3])
```
2. Search with code instead of reading everything:
```repl
import re
hits = [line for line in lines if re.search(r"some pattern", line, re.IGNORECASE)]
print(len(hits)); print(hits[:5])
```
3. Compute the answer with code, store it in a variable, print it to check it:
```repl
from collections import Counter
counts = Counter(line.split()[0] for line in lines if line.strip())
print(counts.most_common(5))
```
4. For meaning that code cannot find, split the input and ask sub-models about each chunk:
```repl
size = {chunk_chars}
chunks = [context[i:i + size] for i in range(0, len(context), size)]
notes = llm_query_batched([f"Quote every line about <topic> in this text, or say NONE.\\n\\n{{c}}" for c in chunks])
print([n[:200] for n in notes])
```
Rules: compute from the input variables; never assign to them and never retype data from the
preview. Run code and read its real output in the next message; never write the output you expect.
When the printed result answers the question, finish with the variable that holds it."""


def system_prompt(
    *, protocol: Protocol, signature: Any, instructions: str, function_docs: list[str], demos: list[Any], display: Display
) -> str:
    text = REPL_PROMPT.format(
        functions="\n".join(f"- {doc}" for doc in function_docs),
        finish=protocol.render_finish(describe_outputs(signature)),
    )
    text += "\n\n" + REPL_MOVES.format(chunk_chars=f"{max(1_000, display.sub_model_chars // 2):_}")
    if instructions.strip():
        text += f"\n\nTask instructions:\n{instructions.strip()}"
    return text + render_demos(demos, display)


def task_message(*, inputs: dict[str, Any], aliases: dict[str, str], signature: Any, display: Display, max_iterations: int) -> str:
    lines = ["Your inputs are loaded in the REPL as variables:"]
    lines += [describe_input(name, value, display) for name, value in inputs.items()]
    lines += [f"- `{alias}` is the same object as `{name}`." for alias, name in aliases.items()]
    outputs = "; ".join(f"`{name}`: {desc}" for name, desc in describe_outputs(signature).items())
    lines.append(f"\nProduce: {outputs}.")
    lines.append(f"You have {max_iterations} turns. Start by exploring the inputs with code.")
    return "\n".join(lines)


def feedback_message(outputs: list[str], *, turn: int, max_iterations: int, limit: int) -> str:
    """The user message after a turn: each block's output, cut head + tail to ``limit``."""
    body = "\n\n".join(outputs) if outputs else "(no output)"
    return f"REPL output:\n{bounded(body, limit)}\n\n[turn {turn + 1} of {max_iterations} done]"

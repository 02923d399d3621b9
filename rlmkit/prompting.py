"""Every text the model reads: the root's system message (REPL, functions, how to finish,
instructions, demos), the first user message (the inputs as REPL variables, the outputs
wanted), each protocol's finish and "answer now" texts, and the feedback after each turn.

Inputs appear as type, size and a head/tail preview; short ones in full. The body of a long
input never enters a prompt.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import dspy

from rlmkit.errors import ConfigError
from rlmkit.signature import describe_outputs
from rlmkit.trajectory import bounded

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


# Each protocol's texts (rlmkit/protocols/): how it tells the model to finish ({fields}: the
# output fields), and the one-time request at max_iterations. A protocol object holds its own
# as attributes, starting from these; optimizers may rewrite them.
@dataclass(frozen=True)
class FinishTexts:
    finish: str
    answer_now: str


ANSWER_NOW = "You are out of turns. Give your final answer now."  # a protocol without its own
SUBMIT_TEXTS = FinishTexts(
    finish=(
        "When you are done, call SUBMIT({fields}) inside a ```repl block, passing the variables (or "
        "literals) that hold your final values, never a type name such as str. Only call SUBMIT once you "
        "have printed and checked the answer."
    ),
    answer_now=(
        "You are out of turns. Reply now with one ```repl block that calls SUBMIT(...) with your best answer."
    ),
)
FINAL_TEXTS = FinishTexts(
    finish=(
        "When you are done, give the answer with FINAL(your answer) on its own line outside code, or with "
        "FINAL_VAR(variable_name) to return a REPL variable you computed. Both also work inside a ```repl "
        "block. Answer fields: {fields}."
    ),
    answer_now="You are out of turns. Reply now with FINAL(your best answer) or FINAL_VAR(variable_name).",
)
ANSWER_TEXTS = FinishTexts(
    finish=(
        'The REPL has a dict `answer = {{"content": None, "ready": False}}`. When you are done, set '
        'answer["content"] to your final answer ({fields}; a dict of them if there are several) and then '
        'answer["ready"] = True inside a ```repl block. The run ends right after that block.'
    ),
    answer_now=(
        'You are out of turns. Reply now with one ```repl block that sets answer["content"] and '
        'answer["ready"] = True.'
    ),
)

# Guard rails (rlmkit/run/guards.py): a repeated turn, a rebound input, a type submitted as an answer,
# an answer given before the model read what its own turn printed.
NUDGE = (
    "You sent the same code as before, so it does the same thing again. Change approach: look at "
    "the data with a different slice or search, or, if your answer is ready, SUBMIT it now."
)
INPUT_RESTORED = (
    "Note: {names} is an input and was restored to its original value. Inputs are read-only: "
    "store your results under new names."
)
READY_TO_SUBMIT = (
    "{names} {verb} set ({shown}). If that answers the question, reply with only this block:\n"
    "```repl\n{call}\n```"
)
NOT_A_VALUE = (
    "{name}={value} is a {kind}, not a value. Compute the answer into a variable and pass the "
    "variable: {name} = ...  then  SUBMIT({name}={name})"
)

# Typed sub-calls (rlmkit/run/typed_subcalls.py): the sub-model's system message, and the one repair round.
TYPED_CALL_SYSTEM = "{instructions}\n\nReply with only a JSON object with these keys:\n{keys}"
TYPED_CALL_REPAIR = "{error}. Reply with the JSON object only."
TYPED_CALL_DOC = (
    "{call} -> {returns}: {instructions} "
    "Also {name}.batched(list of dicts of those arguments) -> list, run concurrently."
)

# Feedback after a turn.
ANSWER_ACCEPTED = "Answer accepted."
ANSWER_HELD = (
    "Answer held back: you answered {shown} in the same turn that printed the output above, before "
    "reading it. Read that output and the question again. A count, a position or a yes/no found on "
    "the way is not the answer unless the question asks for it. If {shown} answers the question, give "
    "it again; if the output shows the answer, give that; otherwise keep working."
)
ANSWER_REJECTED = "Answer rejected: {error}"
NO_CODE_BLOCK = "Your reply had no ```repl code block. Write Python code in a ```repl block."
REPLY_CUT = "Your reply was cut at the output limit. Keep replies short: a little code per turn."
NO_SUCH_VARIABLE = "FINAL_VAR({name}): no REPL variable named {name!r}"
CELL_TIMED_OUT = "The cell was stopped: it ran past the cell time limit."
WORKER_RESTARTED = "The REPL worker died and was restarted: variables you created are gone (inputs are back)."


@dataclass
class Display:
    """How much of what the model sees, and what the trajectory keeps."""

    full_input_chars: int = 1_000  # inputs up to this size are shown in full
    preview_chars: int = 500  # head + tail preview of longer inputs
    max_output_chars: int = 10_000  # REPL output shown to the model per turn (head + tail)
    trajectory_chars: int = 20_000  # bounded copies of outputs / prompts in the trajectory
    sub_model_chars: int = 100_000  # what the prompt tells the model a sub-call can read
    demo_chars: int = 2_000  # each demo field is cut to this size
    moves: str = "count"  # which list of moves the system prompt shows (MOVES' keys)

    def __post_init__(self) -> None:
        if self.moves not in MOVES:
            raise ConfigError(f"unknown moves {self.moves!r}; choose one of {list(MOVES)}")


class FinishForm(Protocol):
    """How a protocol writes its finishing move (``rlmkit.protocols``; they import these texts)."""

    def render_finish(self, outputs: dict[str, str]) -> str: ...

    def finish_example(self, outputs: dict[str, str], value: str) -> str: ...


class CellReport(Protocol):
    """What the model reads of a cell: a sandbox's ``CellResult``."""

    stdout: str
    stderr: str
    timed_out: bool
    restarted: bool
    error: str | None


def describe_input(name: str, value: object, display: Display) -> str:
    if isinstance(value, str):
        kind, size = "str", f"{len(value):,} characters"
        text = value
    elif isinstance(value, (list, tuple, dict)):
        kind = type(value).__name__
        size = f"{len(value):,} items"
        text = (
            repr(value)
            if len(value) < 200
            else repr(value[:5] if not isinstance(value, dict) else dict(list(value.items())[:5]))
        )
    else:
        kind, text = type(value).__name__, repr(value)
        size = f"{len(text):,} characters as text"
    if len(text) <= display.full_input_chars:
        return (
            f"- `{name}` ({kind}, {size}): {text!r}"
            if isinstance(value, str)
            else f"- `{name}` ({kind}, {size}): {text}"
        )
    half = display.preview_chars // 2
    return f"- `{name}` ({kind}, {size}). Preview: {text[:half]!r} ... {text[-half:]!r}"


def render_demos(demos: list[Any], display: Display) -> str:  # Any: dspy.Examples or dicts, read by .items()
    if not demos:
        return ""
    parts = []
    for i, demo in enumerate(demos, 1):
        items = demo.items() if hasattr(demo, "items") else dict(demo).items()
        fields = "\n".join(
            f"{key}: {bounded(str(value), display.demo_chars)}"
            for key, value in items
            if not str(key).startswith("_")
        )
        parts.append(f"Example {i}:\n{fields}")
    return "\n\nWorked examples:\n" + "\n\n".join(parts)


# Generic moves, shown on every task. A small model replays worked examples as they stand:
# given fenced examples it runs all of them, in order, whatever the output said. So the moves
# are one-liners to pick from, not a script; each runs as written on any text. Chunking is
# described, not shown as code: replayed as a step it costs a 1.5B model on 2 cores minutes.
# Task-agnostic on purpose: no example computes any suite's answer. No move stores a count where
# the finishing move reads it: a 1.5B model replays the list in order, and when the count move
# stored ``result = len(kept)`` and the finish submitted ``result``, it submitted that count to
# questions that asked for a value; the finish now submits what the question asks for, copied
# from printed output (a number only when the question asks how many).
REPL_MOVES = """Moves to pick from, one per turn (re, math, Counter and defaultdict are imported;
put in your input's name, the question's words, and text copied exactly from printed data):
- look at the layout: `print(len(context)); print(context[:500])`
- find key words and print around each match: `for m in list(re.finditer(re.escape("key words"), \
context))[:5]: print(repr(context[max(0, m.start() - 150):m.end() + 150]))`
- count lines carrying every text the question names: `kept = [line for line in context.splitlines() \
if "text one" in line and "text two" in line]; print(len(kept), kept[:2])`
- tally a field's values: `tally = Counter(re.findall(r"field: (\\w+)", context)); \
print(tally.most_common(5))`
- finish as soon as printed output shows what the question asks for (a count only when it asks \
how many), copied exactly: `{finish_example}`
- when no match or count can answer (the answer needs reading), split the input into chunks of
about {chunk_chars} characters and have sub-models read them with llm_query_batched; slow (one
call per chunk), so try the moves above first.
Compute from the input variables; never assign to them and never retype data from the preview.
Write one ```repl block, then stop: its real output comes in the next message."""

# The same moves for reading: every move prints, with wider windows around each match, and the
# run ends on a value the model has printed and read, copied into SUBMIT.
READING_MOVES = """Moves to pick from, one per turn (re, math, Counter and defaultdict are imported;
put in your input's name, the question's words, and text copied exactly from printed data):
- look at the layout: `print(len(context)); print(context[:500])`
- find the question's names and print around each match: `for m in list(re.finditer(re.escape(\
"name from the question"), context))[:5]: print(repr(context[max(0, m.start() - 300):m.end() + 300]))`
- print the lines carrying every text the question names: `kept = [line for line in \
context.splitlines() if "text one" in line and "text two" in line]; print(len(kept)); print(kept[:10])`
- tally a field's values: `tally = Counter(re.findall(r"field: (\\w+)", context)); \
print(tally.most_common(5))`
- once printed output shows the answer, finish with it, copied exactly: `{finish_example}`
- when no search can answer (the answer needs reading), split the input into chunks of about
{chunk_chars} characters and have sub-models read them with llm_query_batched; slow (one call
per chunk), so try the moves above first.
Answer only from text you have printed; never guess. Never assign to the input variables.
Write one ```repl block, then stop: its real output comes in the next message."""
MOVES = {"count": REPL_MOVES, "read": READING_MOVES}
# The finishing move of both sets: the value the question asks for, copied from printed output
# into a variable no other move sets (never a count a move stored), then the protocol's own finish
# with that variable (SUBMIT, FINAL_VAR or the answer dict, each takes a variable).
_COPIED = 'found = "the answer, copied from the output"; '


def finish_move(protocol: FinishForm, output_fields: dict[str, str], moves: str = "count") -> str:
    """The moves' finishing one, in the protocol's own form: a value copied from the output,
    submitted through the variable ``found``. The same for every set of moves (``moves`` is
    accepted for callers that name theirs). optimizers/compile re-renders it when it turns a run
    into another protocol's data."""
    return _COPIED + protocol.finish_example(output_fields, "found")


def system_prompt(
    *,
    protocol: FinishForm,
    signature: type[dspy.Signature],
    instructions: str,
    function_docs: list[str],
    demos: list[Any],
    display: Display,
) -> str:
    text = REPL_PROMPT.format(
        functions="\n".join(f"- {doc}" for doc in function_docs),
        finish=protocol.render_finish(describe_outputs(signature)),
    )
    text += "\n\n" + MOVES[display.moves].format(
        chunk_chars=f"{max(1_000, display.sub_model_chars // 2):_}",
        finish_example=finish_move(protocol, describe_outputs(signature), display.moves),
    )
    if instructions.strip():
        text += f"\n\nTask instructions:\n{instructions.strip()}"
    return text + render_demos(demos, display)


def task_message(
    *,
    inputs: dict[str, object],
    aliases: dict[str, str],
    signature: type[dspy.Signature],
    display: Display,
    max_iterations: int,
    earlier: str = "",
    current: Collection[str] = (),
) -> str:
    """The first user message. A session's call reads in chat order: what earlier calls asked
    and left (``earlier``, ``session_notes``) first, then the inputs, this call's own
    (``current``) last."""
    lines = [f"{earlier.strip()}\n"] if earlier.strip() else []
    lines.append("Your inputs are loaded in the REPL as variables:")
    lines += [describe_input(name, value, display) for name, value in inputs.items() if name not in current]
    lines += [f"- `{alias}` is the same object as `{name}`." for alias, name in aliases.items()]
    lines += [describe_input(name, value, display) for name, value in inputs.items() if name in current]
    outputs = "; ".join(f"`{name}`: {desc}" for name, desc in describe_outputs(signature).items())
    lines.append(f"\nProduce: {outputs}.")
    lines.append(f"You have {max_iterations} turns. Start by exploring the inputs with code.")
    return "\n".join(lines)


def feedback_message(outputs: list[str], *, turn: int, max_iterations: int, limit: int) -> str:
    """The user message after a turn: each block's output, cut head + tail to ``limit``."""
    body = "\n\n".join(outputs) if outputs else "(no output)"
    return f"REPL output:\n{bounded(body, limit)}\n\n[turn {turn + 1} of {max_iterations} done]"


def cell_output(cell: CellReport, *, number: int | None = None) -> str:
    """What the model reads of one cell (a sandbox CellResult); ``number`` labels one of several blocks."""
    parts = [f"[block {number}]"] if number is not None else []
    if cell.stdout:
        parts.append(cell.stdout.rstrip("\n"))
    if cell.stderr:
        parts.append(f"stderr:\n{cell.stderr.rstrip()}")
    if cell.timed_out:
        parts.append(CELL_TIMED_OUT)
    if cell.restarted:
        parts.append(WORKER_RESTARTED)
    if cell.error:
        parts.append(cell.error.rstrip())
    if len(parts) == (0 if number is None else 1):
        parts.append("(no output)")
    return "\n".join(parts)


# -- a session's later calls: what is still loaded, what was asked before, what was lost -----
SESSION_RESTORED = {
    "idle": "The REPL was stopped while idle and rebuilt from its last checkpoint.",
    "worker_died": "The REPL worker died after the last call and was rebuilt from its last checkpoint.",
    "loaded": "The REPL was rebuilt from a saved session.",
    "interrupted": "The last call was stopped midway; the REPL was rebuilt from the checkpoint before it.",
}


# A compacted task message: what it says of the calls and variables it leaves out or shortens.
SUMMARY_CHARS = 80  # a summarised call's question and answer, each cut to this
SESSION_CALLS_LEFT_OUT = "({count} earlier calls are left out to keep this message short.)"
SESSION_VARIABLES_LEFT_OUT = "- ({count} older variables are not listed here: SHOW_VARS() lists them all.)"


def session_notes(
    *,
    variables: dict[str, str],
    history: list[tuple[dict[str, object], dict[str, object]]],  # earlier calls: inputs, outputs
    restored: str | None,
    lost: dict[str, str],
    limit: int,
    summarised: int = 0,
    forgotten: int = 0,
    unlisted: int = 0,
) -> str:
    """Put in front of a session call's inputs in its task message: earlier questions and answers
    (each value cut to ``limit`` chars), what a rebuild lost, the variables earlier calls left in
    the REPL. A compacted message (``rlmkit.session.compaction``) leaves out the ``forgotten`` oldest
    calls, shows the next ``summarised`` as one short line each, and leaves the ``unlisted`` oldest
    variables to ``SHOW_VARS()``."""
    parts = []
    if history:
        lines = ["Earlier calls in this session (oldest first):"]
        if forgotten:
            lines.append(SESSION_CALLS_LEFT_OUT.format(count=forgotten))
        for number, (inputs, outputs) in enumerate(history[forgotten:], forgotten + 1):
            cut = SUMMARY_CHARS if number <= forgotten + summarised else limit
            asked = "; ".join(f"{k}: {bounded(str(v), cut)}" for k, v in inputs.items())
            said = "; ".join(f"{k}: {bounded(str(v), cut)}" for k, v in outputs.items())
            lines.append(f"[{number}] {asked}\n    -> {said}")
        parts.append("\n".join(lines))
    if restored:
        parts.append(SESSION_RESTORED.get(restored, restored))
    if lost:
        gone = ", ".join(f"`{name}` ({why})" for name, why in lost.items())
        parts.append(f"These variables could not be kept and are gone: {gone}.")
    if variables:
        kept = [f"- `{name}`: {desc}" for name, desc in list(variables.items())[unlisted:]]
        if unlisted:
            kept.insert(0, SESSION_VARIABLES_LEFT_OUT.format(count=unlisted))
        parts.append("Variables that earlier calls made are still in the REPL:\n" + "\n".join(kept))
    return "".join(f"\n\n{part}" for part in parts)

"""Root instructions proposed by an LM from failed and successful trajectories.

Like MIPRO's grounded proposer and GEPA's reflection step, the proposer shows a model what
the program is for (its signature and current instructions), a few runs that succeeded
and a few that failed (transcripts trimmed the same way demos are, plus the error or
score), and asks for new instructions. Replies put each candidate inside
``<instruction>...</instruction>`` tags so parsing does not depend on the model's prose.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from optimizers.tuner.demos import ScoredRun, render_transcript
from rlmkit.concurrency.sync_loop import run_sync
from rlmkit.errors import UserError
from rlmkit.models.contract import Model

TAG = re.compile(r"<instruction>(.*?)</instruction>", re.DOTALL | re.IGNORECASE)
MAX_INSTRUCTION_CHARS = 4_000
RUN_CHARS = 1_200  # per transcript shown to the proposer

SYSTEM = (
    "You improve the instructions of a Recursive Language Model program. The program's root "
    "model works in a Python session where the long inputs are variables; it writes code to inspect "
    "them, may call sub-models as functions, and ends by submitting its outputs. You see the "
    "current instructions and runs that succeeded or failed. Write instructions that would make "
    "the failed runs succeed without breaking the successful ones: say what to look at first, "
    "which strategy to use, what mistakes to avoid, and how to finish."
)


def build_messages(
    signature: str,
    current: str,
    successes: Sequence[ScoredRun],
    failures: Sequence[ScoredRun],
    n: int,
) -> list[dict[str, str]]:
    """The chat messages asking for ``n`` candidate instructions."""
    parts = [f"Program signature: {signature}", f"Current instructions:\n{current or '(none)'}"]
    for title, runs in (("Successful runs", successes), ("Failed runs", failures)):
        if not runs:
            continue
        parts.append(f"{title}:")
        for i, run in enumerate(runs, 1):
            verdict = f"score={run.score:g}"
            if run.trajectory.error:
                verdict += f", error={run.trajectory.error_type or 'error'}: {run.trajectory.error[:200]}"
            parts.append(f"--- run {i} ({verdict})\n{render_transcript(run.trajectory, RUN_CHARS)}")
    parts.append(
        f"Write {n} different improved instructions. Put each one inside "
        "<instruction>...</instruction> tags and write nothing else. Inside the tags write only the "
        "instruction itself, addressed to the program's model (e.g. 'Look at ...'), with no introduction."
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]


# A proposer's own framing, which small models put inside the tags: "To improve the instructions
# for the Recursive Language Model, ...:", "Here is the revised instruction:", "Sure!".
_PREAMBLE = (
    re.compile(r"^\s*(?:sure|certainly|okay|ok|of course)\s*[!.,]\s*", re.IGNORECASE),  # a bare "Sure!"
    re.compile(
        r"^\s*(?:here(?:'s| is| are)|to improve|below|improved|revised|updated|the following|"
        r"i (?:would|suggest|propose))\b[^\n]*[:!][ \t]*(?:\n+|\Z)",
        re.IGNORECASE,
    ),  # a framing line
    re.compile(
        r"^\s*(?:to improve|here(?:'s| is| are))\b[^\n:]*\binstructions?\b[^\n:]*:\s+", re.IGNORECASE
    ),  # "To improve the instructions ..., do this: <instruction>" on one line
    re.compile(
        r"^\s*(?:#+\s*|\*\*)?(?:improved |revised |new )?instructions?\s*\d*\s*:?\s*(?:\*\*)?\s*:?\s*\n",
        re.IGNORECASE,
    ),  # a heading
)


def clean_instruction(text: str) -> str:
    """Only the instruction: without the proposer's preamble, a heading, or wrapping quotes."""
    text = text.strip()
    while True:
        cut = text
        for pattern in _PREAMBLE:
            cut = pattern.sub("", cut, count=1).strip()
        if cut == text:
            break
        text = cut
    if len(text) > 1 and text[0] == text[-1] and text[0] in "\"'`":
        text = text[1:-1].strip()
    return text


def parse_instructions(text: str) -> list[str]:
    """Candidates found between tags, cleaned, de-duplicated, in order."""
    found = []
    for match in TAG.findall(text or ""):
        candidate = clean_instruction(match)[:MAX_INSTRUCTION_CHARS]
        if candidate and candidate not in found:
            found.append(candidate)
    return found


def complete_text(lm: Any, messages: list[dict[str, str]]) -> str:
    """One completion from a model of rlmkit's contract (``rlmkit.Model``) or a ``dspy.LM`` (callable)."""
    if isinstance(lm, Model):
        return run_sync(lm.acomplete(messages)).text
    if callable(lm):
        outputs = lm(messages=messages)
        first = outputs[0] if outputs else ""
        return first.get("text", "") if isinstance(first, dict) else str(first)
    raise UserError(f"proposer_lm must be an rlmkit.LM or a dspy.LM, got {type(lm).__name__}")


def propose_instructions(
    lm: Any,
    *,
    signature: str,
    current: str,
    runs: Sequence[ScoredRun],
    n: int = 4,
    per_kind: int = 3,
) -> list[str]:
    """Up to ``n`` new instructions (never the current one), grounded in ``runs``."""
    successes = [run for run in runs if run.succeeded][:per_kind]
    failures = [run for run in runs if not run.succeeded][:per_kind]
    text = complete_text(lm, build_messages(signature, current, successes, failures, n))
    return [candidate for candidate in parse_instructions(text) if candidate != current][:n]

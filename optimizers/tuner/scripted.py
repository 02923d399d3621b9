"""A scripted root model whose accuracy depends on the instructions and the knobs.

For tests and demos of tuners (``rlmkit.testing.ScriptedServer(KeywordResponder())``). The
task: a context with a decoy number first and ``secret=<n>`` somewhere later; the question
asks for the secret. The scripted model

- solves it only when its system prompt contains ``keyword`` (one candidate instruction
  has it): it then explores for ``explore_turns`` turns and submits code that finds the
  secret, so it needs ``max_iterations >= explore_turns + 1`` (told "out of turns" earlier,
  it guesses the first number it sees, which is the decoy);
- without the keyword, submits the first number at once (cheap and wrong).

Every answer is computed by real code in the sandbox, so wrong and right answers come from
the run itself. Non-root requests (an instruction proposer) get ``proposals`` back.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from rlmkit.testing.server import is_root_request

KEYWORD = "SCAN-EVERY-LINE"
FIND_SECRET = "```repl\nimport re\nSUBMIT(answer=int(re.search(r'secret=(\\d+)', context).group(1)))\n```"
GUESS_FIRST = "```repl\nimport re\nSUBMIT(answer=int(re.findall(r'\\d+', context)[0]))\n```"
EXPLORE = "```repl\nprint(len(context))\nprint(context[:80])\n```"


@dataclass
class KeywordResponder:
    keyword: str = KEYWORD
    explore_turns: int = 2
    proposals: list[str] = field(
        default_factory=lambda: [
            "Answer quickly.",
            f"{KEYWORD}: look at the data first, then search every line for the pattern asked for.",
            "Think step by step about the question before writing code.",
        ]
    )
    root_requests: list[dict] = field(default_factory=list)

    def __call__(self, body: dict) -> str:
        if not is_root_request(body):
            return "\n".join(f"<instruction>{text}</instruction>" for text in self.proposals)
        self.root_requests.append(body)
        messages = body.get("messages", [])
        system = str(messages[0].get("content", ""))
        turns = sum(1 for m in messages if m.get("role") == "assistant")
        out_of_turns = "out of turns" in str(messages[-1].get("content", "")).lower()
        if self.keyword not in system:
            return GUESS_FIRST
        if out_of_turns and turns < self.explore_turns:
            return GUESS_FIRST
        return EXPLORE if turns < self.explore_turns else FIND_SECRET


def secret_examples(n: int, seed: int = 0, length: int = 2_000) -> list[Any]:
    """``n`` dspy.Examples (inputs: context, question; label: answer)."""
    import dspy

    rng = random.Random(f"secret|{seed}")
    examples = []
    for _ in range(n):
        decoy, secret = rng.randint(1, 99), rng.randint(100, 999)
        words = " ".join(rng.choice(("alpha", "beta", "gamma", "delta")) for _ in range(length // 6))
        cut = rng.randint(len(words) // 4, len(words) // 2)
        context = f"decoy {decoy}. {words[:cut]} secret={secret} {words[cut:]}"
        example = dspy.Example(context=context, question="What is the secret number?", answer=secret)
        examples.append(example.with_inputs("context", "question"))
    return examples


def secret_metric(example: Any, prediction: Any, trace: Any = None) -> float:
    """1.0 when the predicted answer is the secret."""
    return float(str(getattr(prediction, "answer", "")).strip() == str(example.answer))

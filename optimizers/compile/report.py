"""What a compile did: runs and samples kept / dropped by reason, tokens, rows per task, repairs."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# why a run or a sample was dropped, in words (used in reports and in EmptyDatasetError)
REASONS = {
    "status": "run status not accepted",
    "no_score": "no score (none recorded and no metric given)",
    "zero_score": "score exactly 0.0",
    "min_score": "score below min_score",
    "min_turns": "fewer root turns than min_turns",
    "answer_padded": "answer far longer than the gold (max_answer_ratio): right only by containing it",
    "answer_typed": "answer typed in before any output showed it: a guess that scored",
    "hint_not_read": "hinted run whose output never showed the gold before its last turn",
    "hint_used": "hinted run that could have taken the gold from the hint, not the input",
    "per_task_cap": "over the per-task cap (best runs kept)",
    "duplicate_run": "same run_id read twice",
    "max_sample_chars": "sample longer than max_sample_chars",
    "duplicate": "same prompt and target as an earlier sample",
    "history_rewritten": "the root's history was cut or rewritten, so there is no single conversation",
    "after_unrepairable_turn": "turn after one that could not be repaired",
    "subcall_failed": "sub-call raised an error or returned nothing",
    "subcall_truncated": "sub-call prompt or reply was cut when logged",
    "subcall_not_llm_query": "typed sub-call or tool: its full request is not in the trajectory",
    "no_gold": "task has no gold answer",
    "group_too_small": "fewer rollouts for the example than min_group_size",
    "zero_advantage_group": "every rollout of the example scored the same",
    "single_run": "only one scored run for the example",
    "no_score_gap": "best and worst runs score the same (or within min_margin)",
    "prompts_differ": (
        "best and worst runs did not see the same prompt (runs of several protocols? pass protocol=)"
    ),
    "no_divergent_turn": "best and worst runs gave the same replies",
}


def describe(reason: str) -> str:
    if reason.startswith("unrepairable:"):
        return f"protocol repair failed ({reason.split(':', 1)[1]})"
    return REASONS.get(reason, reason)


def char_tokens(text: str) -> int:
    """Token estimate without a tokenizer: about 4 characters per token."""
    return (len(text) + 3) // 4


def token_counter(tokenizer: Any = None) -> Callable[[str], int]:
    """chars/4 by default; a callable ``str -> int``; or an object with ``encode`` (HF tokenizers)."""
    if tokenizer is None:
        return char_tokens
    if hasattr(tokenizer, "encode"):

        def count(text: str) -> int:
            encoded = tokenizer.encode(text)
            return len(getattr(encoded, "ids", encoded))  # tokenizers.Encoding or list[int]

        return count
    if callable(tokenizer):
        return tokenizer
    raise TypeError("tokenizer must be None, a callable str -> int, or an object with .encode")


@dataclass
class CompileReport:
    kind: str
    signature: str | None = None
    runs_read: int = 0
    bad_lines: int = 0
    runs_kept: int = 0
    runs_dropped: Counter = field(default_factory=Counter)
    samples_dropped: Counter = field(default_factory=Counter)
    rows: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    per_task: Counter = field(default_factory=Counter)
    fixes: Counter = field(default_factory=Counter)
    token_estimate: str = "chars/4"

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "signature": self.signature,
            "runs_read": self.runs_read,
            "bad_lines": self.bad_lines,
            "runs_kept": self.runs_kept,
            "runs_dropped": dict(sorted(self.runs_dropped.items())),
            "samples_dropped": dict(sorted(self.samples_dropped.items())),
            "rows": self.rows,
            "tokens": {
                "prompt": self.prompt_tokens,
                "completion": self.completion_tokens,
                "total": self.tokens,
                "estimate": self.token_estimate,
            },
            "tasks": len(self.per_task),
            "per_task": dict(sorted(self.per_task.items())),
            "fixes": dict(sorted(self.fixes.items())),
        }

    def explain_drops(self) -> str:
        """One line per reason, largest first: what each filter removed."""
        lines = [f"  runs: {n} removed by {r} ({describe(r)})" for r, n in self.runs_dropped.most_common()]
        lines += [
            f"  samples: {n} removed by {r} ({describe(r)})" for r, n in self.samples_dropped.most_common()
        ]
        return "\n".join(lines) or "  (nothing was removed: the input had no runs)"

    def summary(self) -> str:
        head = (
            f"{self.kind}: {self.rows} rows from {self.runs_kept}/{self.runs_read} runs over "
            f"{len(self.per_task)} tasks; tokens {self.tokens:,} (prompt {self.prompt_tokens:,}, "
            f"completion {self.completion_tokens:,}, {self.token_estimate})"
        )
        if self.bad_lines:
            head += f"; {self.bad_lines} unreadable JSONL line(s) skipped"
        fixes = ", ".join(f"{k}={v}" for k, v in sorted(self.fixes.items()))
        return (
            head
            + ("\n" + self.explain_drops() if self.runs_dropped or self.samples_dropped else "")
            + (f"\n  repairs: {fixes}" if fixes else "")
        )

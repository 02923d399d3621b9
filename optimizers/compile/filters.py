"""Run- and sample-level filters, with every removal counted by reason in the report."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from optimizers.compile.hints import answer_typed, hint_of, submitted_text, why_dropped, without_hint
from optimizers.compile.report import CompileReport
from optimizers.compile.turns import run_cost, task_id
from rlmkit.trajectory import Trajectory

Metric = Callable[[Trajectory], "float | None"]


@dataclass(frozen=True)
class Filters:
    """Which runs and samples a compile keeps. Defaults follow the RLM paper's rejection sampling."""

    min_score: float | None = field(default=None, metadata={"help": "keep runs scoring at least this"})
    drop_zero_score: bool = field(default=True, metadata={"help": "drop runs that scored exactly 0.0"})
    min_turns: int = field(default=2, metadata={"help": "drop runs with fewer root turns"})
    max_sample_chars: int | None = field(
        default=100_000, metadata={"help": "drop samples whose messages exceed this many characters"}
    )
    dedupe: bool = field(default=True, metadata={"help": "drop samples with the same prompt and target"})
    per_task_cap: int | None = field(default=None, metadata={"help": "keep at most this many runs per task"})
    statuses: tuple[str, ...] | None = field(
        default=("ok",), metadata={"help": "run statuses to keep; None keeps every status"}
    )
    max_answer_ratio: float | None = field(
        default=4.0,
        metadata={
            "help": "drop runs whose answer is more than this many times as long as the gold, plus 40 "
            "characters: scored right only because the gold is somewhere inside what it submitted"
        },
    )
    drop_typed_answers: bool = field(
        default=True,
        metadata={
            "help": "drop runs whose last turn typed in its answer before any output showed it (a "
            "guess that scored): hinted runs are judged more strictly, against the gold"
        },
    )
    per_turn: bool = field(
        default=False,
        metadata={
            "help": "sft: also drop single turns (code that failed, more or less than one code block, "
            "made-up REPL output, a rejected answer, a repeated turn and every turn after it)"
        },
    )

    def __post_init__(self) -> None:
        if self.min_turns < 0 or (self.per_task_cap is not None and self.per_task_cap < 1):
            raise ValueError("min_turns must be >= 0 and per_task_cap >= 1")
        if self.max_sample_chars is not None and self.max_sample_chars < 1:
            raise ValueError("max_sample_chars must be >= 1")
        if self.max_answer_ratio is not None and self.max_answer_ratio < 1:
            raise ValueError("max_answer_ratio must be >= 1: an answer as long as its gold is never padded")

    @classmethod
    def rollouts(cls, **overrides: Any) -> Filters:
        """For RL groups and DPO pairs: failures are data too (low rewards, rejected answers)."""
        base = {
            "drop_zero_score": False,
            "min_turns": 1,
            "max_sample_chars": None,
            "dedupe": False,
            "statuses": None,
            "max_answer_ratio": None,
            "drop_typed_answers": False,
        }
        return cls(**{**base, **overrides})

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["statuses"] = list(self.statuses) if self.statuses is not None else None
        return data


@dataclass
class Scored:
    run: Trajectory
    score: float | None
    task_id: str


def select_runs(
    runs: Iterable[Trajectory], filters: Filters, report: CompileReport, metric: Metric | None
) -> list[Scored]:
    """Score each run (recorded score, else ``metric(run)``) and apply the run-level filters."""
    kept: list[Scored] = []
    for run in runs:
        score = run.score if run.score is not None else (metric(run) if metric is not None else None)
        # a run the other filters drop is counted by them: the hint's reasons then count only the
        # runs that would otherwise train, which is what a hinted sampling's yield turns on
        reason = _run_reason(run, score, filters)
        if reason is None and hint_of(run) is not None:  # told the answer: trains only if it read it
            reason = why_dropped(run)
        if reason:
            report.runs_dropped[reason] += 1
            continue
        if hint_of(run) is not None:
            run = without_hint(run)  # its rows never show the hint
        kept.append(Scored(run, None if score is None else float(score), task_id(run)))
    if filters.per_task_cap is not None:
        kept = _cap_per_task(kept, filters.per_task_cap, report)
    return kept


def _run_reason(run: Trajectory, score: float | None, filters: Filters) -> str | None:
    if filters.statuses is not None and run.status not in filters.statuses:
        return "status"
    if score is None:
        if filters.min_score is not None or filters.drop_zero_score:
            return "no_score"
    elif filters.drop_zero_score and score == 0.0:
        return "zero_score"
    elif filters.min_score is not None and score < filters.min_score:
        return "min_score"
    if run.n_turns < filters.min_turns:
        return "min_turns"
    return unearned(run, filters.max_answer_ratio, filters.drop_typed_answers)


def unearned(run: Trajectory, max_answer_ratio: float | None, typed: bool = True) -> str | None:
    """Why a run's score was not earned by finding the answer (``answer_padded``: the gold is
    somewhere in a much longer answer; ``answer_typed``: the answer was typed in before any
    output showed it, unhinted runs only), or None."""
    if max_answer_ratio is not None and _padded(run, max_answer_ratio):
        return "answer_padded"
    if typed and hint_of(run) is None and answer_typed(run):
        return "answer_typed"
    return None


def _padded(run: Trajectory, ratio: float) -> bool:
    """Whether the answer is far longer than the gold: a suite that scores by containment (the
    gold somewhere in the answer) scores a dump of the input right, and training on it would teach
    the dump. Runs without a recorded gold or answer are never padded."""
    gold = (run.meta.task or {}).get("gold")
    if gold is None or not run.outputs:
        return False
    return len(submitted_text(run)) > ratio * len(str(gold)) + 40


def _cap_per_task(kept: list[Scored], cap: int, report: CompileReport) -> list[Scored]:
    by_task: dict[str, list[Scored]] = defaultdict(list)
    for item in kept:
        by_task[item.task_id].append(item)
    chosen: set[int] = set()
    for items in by_task.values():
        # best first: highest score, then cheapest, then run id so the choice is reproducible
        items.sort(
            key=lambda s: (
                -(s.score if s.score is not None else float("-inf")),
                run_cost(s.run),
                s.run.meta.run_id,
            )
        )
        chosen.update(id(item) for item in items[:cap])
        if len(items) > cap:
            report.runs_dropped["per_task_cap"] += len(items) - cap
    return [item for item in kept if id(item) in chosen]


class SampleGate:
    """Sample-level filters (size, duplicates); counts what it drops in the report."""

    def __init__(self, filters: Filters, report: CompileReport):
        self.filters = filters
        self.report = report
        self._seen: set[bytes] = set()

    def admit(self, *conversations: list[dict[str, Any]]) -> bool:
        limit = self.filters.max_sample_chars
        if limit is not None and sum(len(m["content"]) for c in conversations for m in c) > limit:
            self.report.samples_dropped["max_sample_chars"] += 1
            return False
        if self.filters.dedupe:
            digest = hashlib.sha256()
            for conversation in conversations:
                digest.update(b"\x02")
                for message in conversation:  # role and content are all that make two samples the same
                    digest.update(f"{message['role']}\x00{message['content']}\x01".encode())
            key = digest.digest()
            if key in self._seen:
                self.report.samples_dropped["duplicate"] += 1
                return False
            self._seen.add(key)
        return True

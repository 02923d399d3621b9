"""Arms of one comparison run interleaved, example by example, and bounded by turns and tokens.

    rows = run_interleaved(["base", "round3"], examples, run_one)   # base ex1, round3 ex1, base ex2 ...

A run ends on its turn bound or its token bound, never on the clock: a verdict computed from
such runs is the same on a busy machine as on a quiet one. Wall time is a fault guard only, set
far above any normal run: a run that hits it (``Outcome.guard_hit``) is run again once, and if
it hits it again it is recorded as ``cut`` and reported apart: a cut run is not a score of 0,
and no mean counts it. Interleaving puts the arms of one example next to each other in time, so
whatever load the machine is under falls on both alike.

Nothing here runs a model: ``run_one(arm, example)`` does (the CLI builds it from the suites'
programs), so the same code runs under a scripted model in tests."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from optimizers.selftrain.paired import paired_compare

RIGHT_SCORE = 0.9  # as the matrix counts a run answered right


class Outcome(BaseModel):
    """What one run of one arm on one example did."""

    model_config = ConfigDict(frozen=True)

    score: float = 0.0
    turns: int = 0
    tokens: int = 0
    seconds: float = 0.0
    guard_hit: bool = False  # stopped by the wall-time fault guard: no score
    failure: str | None = None  # how a run that was not cut failed (it scores what it scored)


class RunRow(BaseModel):
    """One arm on one example, as the comparison records it: its score, or ``cut``."""

    model_config = ConfigDict(frozen=True)

    id: str
    arm: str
    status: Literal["scored", "cut"]
    score: float | None = Field(description="None when cut")
    turns: int
    tokens: int
    seconds: float
    attempts: int = Field(ge=1, le=2, description="2 when the first run hit the guard")
    failure: str | None = None


def run_once_more_if_guarded(arm: str, example: Any, run_one: Callable[[str, Any], Outcome]) -> RunRow:
    """One arm on one example: run again once if the fault guard stopped it; cut if it stops it twice."""
    for attempt in (1, 2):  # noqa: B007 - the last attempt is recorded
        outcome = run_one(arm, example)
        if not outcome.guard_hit:
            break
    example_id = getattr(example, "id", str(example))
    return RunRow(
        id=example_id, arm=arm, status="cut" if outcome.guard_hit else "scored",
        score=None if outcome.guard_hit else outcome.score, turns=outcome.turns, tokens=outcome.tokens,
        seconds=round(outcome.seconds, 3), attempts=attempt, failure=outcome.failure,
    )  # fmt: skip


def run_interleaved(
    arms: Sequence[str],
    examples: Iterable[Any],
    run_one: Callable[[str, Any], Outcome],
    *,
    rows_file: Path | None = None,
    on_row: Callable[[RunRow], None] | None = None,
) -> list[RunRow]:
    """Every arm on every example, example by example: arm A ex1, arm B ex1, arm A ex2 ...

    ``rows_file``: a JSONL file each row is appended to as it finishes; rows already there are
    kept, so a stopped comparison resumes where it stopped."""
    done = {(row.arm, row.id): row for row in read_rows(rows_file)} if rows_file else {}
    rows = []
    for example in examples:
        for arm in arms:
            key = (arm, getattr(example, "id", str(example)))
            row = done.get(key)
            if row is None:
                row = run_once_more_if_guarded(arm, example, run_one)
                if rows_file is not None:
                    rows_file.parent.mkdir(parents=True, exist_ok=True)
                    with rows_file.open("a") as handle:
                        handle.write(row.model_dump_json() + "\n")
                if on_row:
                    on_row(row)
            rows.append(row)
    return rows


def read_rows(path: Path | None) -> list[RunRow]:
    if path is None or not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(RunRow.model_validate_json(line))
        except ValueError:  # a half-written last line of a stopped comparison: that run runs again
            continue
    return rows


def suite_table(suite: str, family: str, arms: Sequence[str], rows: Sequence[RunRow]) -> dict[str, Any]:
    """One suite's row of a score table, in the matrix table's shape (``gate.verdict`` reads it):
    each arm's mean over the examples every arm scored, the runs scored and cut apart, and each
    arm but the first compared with the first, paired."""
    by_arm = {arm: {row.id: row for row in rows if row.arm == arm} for arm in arms}
    scored = {
        arm: {i: row.score for i, row in runs.items() if row.status == "scored"}
        for arm, runs in by_arm.items()
    }
    shared = sorted(set.intersection(*(set(s) for s in scored.values()))) if scored else []
    kept = {arm: {i: scored[arm][i] for i in shared} for arm in arms}
    base = arms[0]
    return {
        "suite": suite,
        "family": family,
        "finished": bool(shared),  # no example every arm scored: nothing to judge it on
        "n": len(shared),
        "scored": {arm: len(s) for arm, s in scored.items()},
        "cut": {arm: sum(row.status == "cut" for row in runs.values()) for arm, runs in by_arm.items()},
        "means": {arm: (sum(s.values()) / len(s) if s else 0.0) for arm, s in kept.items()},
        "right": {arm: sum(v >= RIGHT_SCORE for v in s.values()) for arm, s in kept.items()},
        "versus_base": {
            arm: paired_compare(kept[base], kept[arm]).model_dump() for arm in arms[1:] if shared
        },
    }

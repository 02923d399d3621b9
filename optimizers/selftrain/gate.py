"""Whether an adapter ships: a rule over the held-out matrix, written before it is measured.

A candidate arm ships only if, on every suite of the matrix (each finished, at its full n):
- no suite's mean falls more than ``max_drop`` below the base arm's;
- every suite of a family it was trained on gains over the base, its 95% interval above 0;
- at least one real-text suite gains over the base, its interval above 0;
- its mean over the suites is above the best prompt-only arm's (the base model with other moves).

Until the matrix is whole the verdict is "not measured": a partial matrix can fail a candidate
(a finished suite already below the limit fails it whatever the rest shows) but never pass it, so
a verdict with failures is final: ``Verdict.held_back``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class GateRule(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    max_drop: float = Field(0.05, ge=0, description="the most any suite's mean may fall below the base's")
    min_n: dict[str, int] = Field(
        default_factory=lambda: {"real_text": 30, "synthetic": 20},
        description="examples a suite needs before it counts (real-text and synthetic suites)",
    )


class Verdict(BaseModel):
    candidate: str
    ships: bool
    measured: bool  # every suite finished at its full n
    failures: list[str]  # each rule the candidate fails, in words
    missing: list[str]  # suites not yet measured at their full n

    @property
    def held_back(self) -> bool:
        """Failed on finished suites alone: no suite still to come can change that."""
        return bool(self.failures)


def verdict(
    table: list[dict[str, Any]],
    suites: Iterable[str],
    *,
    candidate: str,
    prompt_arms: Iterable[str],
    trained_families: Iterable[str],
    real_text: Iterable[str],
    rule: GateRule = GateRule(),
) -> Verdict:
    """``table`` is ``MatrixRun.table()``; ``suites`` every suite label the matrix plans;
    ``real_text`` the families whose contexts are real text (programs.tasks.real_text.FAMILIES:
    this package never imports a task suite)."""
    real_text = set(real_text)
    rows = {row["suite"]: row for row in table}
    missing = [
        label
        for label in suites
        if label not in rows
        or not rows[label]["finished"]
        or rows[label]["n"] < rule.min_n["real_text" if rows[label]["family"] in real_text else "synthetic"]
    ]
    failures = []
    for row in rows.values():
        compared = row["versus_base"][candidate]
        if not row["finished"]:  # a mean over part of a suite may still move either way
            continue
        if compared["other_mean"] < compared["base_mean"] - rule.max_drop:
            failures.append(
                f"{row['suite']}: {compared['other_mean']:.2f} is more than {rule.max_drop} below the "
                f"base's {compared['base_mean']:.2f}"
            )
        if row["family"] in set(trained_families) and compared["ci95"][0] <= 0:
            failures.append(f"{row['suite']} (trained on): the gain's interval reaches 0 ({_ci(compared)})")
    real = [row for row in rows.values() if row["family"] in real_text]
    if (
        real
        and all(row["finished"] for row in real)
        and not any(row["versus_base"][candidate]["ci95"][0] > 0 for row in real)
    ):
        failures.append(
            "no real-text suite gains with an interval above 0 ("
            + "; ".join(f"{row['suite']} {_ci(row['versus_base'][candidate])}" for row in real)
            + ")"
        )
    if rows:
        overall = {name: _mean(rows.values(), name) for name in (candidate, *prompt_arms)}
        best = max(prompt_arms, key=overall.get, default=None)
        if best is not None and not missing and overall[candidate] <= overall[best]:
            failures.append(
                f"its matrix mean {overall[candidate]:.3f} is not above the prompt-only arm "
                f"{best!r}'s {overall[best]:.3f}"
            )
    return Verdict(
        candidate=candidate, ships=not failures and not missing, measured=not missing, failures=failures,
        missing=missing,
    )  # fmt: skip


def _mean(rows: Iterable[dict[str, Any]], arm: str) -> float:
    means = [row["means"][arm] for row in rows]
    return sum(means) / len(means)


def _ci(compared: dict[str, Any]) -> str:
    low, high = compared["ci95"]
    return f"{compared['gain']:+.2f} [{low:+.2f}, {high:+.2f}]"

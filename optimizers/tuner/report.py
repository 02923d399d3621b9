"""Trials as rows, the accuracy/cost Pareto front, a text table and a plot file."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlmkit.errors import UserError


@dataclass
class TrialRow:
    """One trial as the user sees it."""

    number: int
    state: str  # COMPLETE, PRUNED, FAIL, RUNNING
    accuracy: float | None
    cost: float | None  # mean per example, in the tuner's cost unit
    n_examples: int
    params: dict[str, Any] = field(default_factory=dict)  # Config.summary()
    error: str | None = None

    @property
    def complete(self) -> bool:
        return self.state == "COMPLETE" and self.accuracy is not None and self.cost is not None


def dominates(a: TrialRow, b: TrialRow) -> bool:
    """``a`` is at least as accurate and as cheap as ``b``, and strictly better in one."""
    return a.accuracy >= b.accuracy and a.cost <= b.cost and (a.accuracy > b.accuracy or a.cost < b.cost)


def accuracy_upper_bound(accuracy: float, n: int, z: float = 1.96) -> float:
    """Upper end of the 95% Wilson interval of a mean score over ``n`` examples: what the trial
    may plausibly still reach. After one example it is 0.79 for a miss, so one miss stops nothing."""
    if n <= 0:
        return 1.0
    p = min(max(accuracy, 0.0), 1.0)
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return min(1.0, (centre + spread) / (1 + z * z / n))


def dominated_by_front(front: Sequence[TrialRow], accuracy: float, cost: float, n: int | None = None) -> bool:
    """The multi-objective pruning rule: a finished front trial is more accurate and no more
    expensive than this partial result. With ``n`` (examples scored so far), "more accurate" means
    above the partial accuracy's 95% upper bound, not above a score from a handful of examples.
    (Optuna's pruners handle one objective only.)"""
    reach = accuracy if n is None else accuracy_upper_bound(accuracy, n)
    return any(row.accuracy > reach and row.cost <= cost for row in front)


def pareto_front(rows: Sequence[TrialRow]) -> list[TrialRow]:
    """Completed trials no other completed trial dominates, most accurate first."""
    done = [row for row in rows if row.complete]
    front = [row for row in done if not any(dominates(other, row) for other in done)]
    return sorted(front, key=lambda r: (-r.accuracy, r.cost, r.number))


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def format_table(rows: Sequence[TrialRow], cost_unit: str) -> str:
    """A fixed-width text table: trial, accuracy, cost, then every parameter."""
    if not rows:
        return "(no trials)"
    param_names: list[str] = []
    for row in rows:
        for name in row.params:
            if name not in param_names:
                param_names.append(name)
    header = ["trial", "accuracy", f"cost ({cost_unit}/example)", "examples", *param_names]
    body = [
        [
            str(r.number),
            _fmt(r.accuracy),
            _fmt(r.cost),
            str(r.n_examples),
            *(_fmt(r.params.get(n)) for n in param_names),
        ]
        for r in rows
    ]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in [header, *body]
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def plot_front(rows: Sequence[TrialRow], path: str | Path, cost_unit: str) -> Path:
    """Scatter every completed trial (cost vs accuracy) and draw the front; write ``path``."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only, never a window
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - matplotlib is a dev/optimize dependency
        raise UserError("plotting needs matplotlib: pip install matplotlib") from exc
    done = [row for row in rows if row.complete]
    front = sorted(pareto_front(rows), key=lambda r: r.cost)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.scatter([r.cost for r in done], [r.accuracy for r in done], color="0.6", label="trials")
    ax.plot([r.cost for r in front], [r.accuracy for r in front], "o-", color="tab:red", label="Pareto front")
    for row in front:
        ax.annotate(f"#{row.number}", (row.cost, row.accuracy), textcoords="offset points", xytext=(4, 4))
    ax.set_xlabel(f"cost ({cost_unit} per example)")
    ax.set_ylabel("accuracy")
    ax.set_title("accuracy vs cost")
    ax.legend(loc="lower right")
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
    return out

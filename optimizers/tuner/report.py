"""Trials as rows, the accuracy/cost Pareto front, a text table and a plot file."""

from __future__ import annotations

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


def dominated_by_front(front: Sequence[TrialRow], accuracy: float, cost: float) -> bool:
    """The multi-objective pruning rule: a finished front trial is strictly more accurate and no
    more expensive than this partial result. (Optuna's pruners handle one objective only.)"""
    return any(row.accuracy > accuracy and row.cost <= cost for row in front)


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

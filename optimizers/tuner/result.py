"""What ``RLMTuner.fit`` returns: the chosen program, every trial, the Pareto front.

``save(dir)`` writes ``program.json`` (the RLM's own ``save``: root instructions + demos),
``config.json`` (knob values, which a module's state does not hold) and ``front.txt``.
``load_tuned(dir, program)`` rebuilds the tuned program from a base RLM or a factory.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from optimizers.tuner.report import TrialRow, format_table, pareto_front, plot_front
from optimizers.tuner.space import Config, apply_config
from rlmkit.errors import UserError


def rows_from_study(study: Any) -> list[TrialRow]:
    """Every trial of ``study`` as a TrialRow (running ones included, marked RUNNING)."""
    rows = []
    trials = study.get_trials(deepcopy=False)
    # optuna's RetryFailedTrialCallback: a retry's retry_history ends with the trial it reruns
    retries = {
        t.system_attrs["retry_history"][-1]: t.number for t in trials if t.system_attrs.get("retry_history")
    }
    for trial in trials:
        attrs = trial.user_attrs
        tally = attrs.get("tally", {}) if trial.number not in retries else {}  # a dead worker's partial tally
        error = attrs.get("error") or trial.system_attrs.get("fail_reason")
        if trial.number in retries and trial.state.name == "FAIL":
            error = f"its worker stopped sending heartbeats; retried as trial {retries[trial.number]}"
        rows.append(
            TrialRow(
                number=trial.number,
                state=trial.state.name,
                accuracy=tally.get("accuracy"),
                cost=tally.get("cost"),
                n_examples=int(tally.get("n_examples", 0)),
                params=dict(attrs.get("config", {})),
                error=error,
            )
        )
    return rows


@dataclass
class TuningResult:
    program: Any  # the chosen RLM (None when no trial finished)
    config: Config | None
    trial: TrialRow | None
    rows: list[TrialRow]
    cost_unit: str
    within_cap: bool = True  # False: no trial met cost_cap; ``trial`` is the cheapest instead
    study: Any = field(default=None, repr=False)

    @property
    def front(self) -> list[TrialRow]:
        return pareto_front(self.rows)

    @property
    def failed(self) -> list[TrialRow]:
        return [row for row in self.rows if row.state == "FAIL"]

    def to_table(self, front_only: bool = True) -> str:
        return format_table(self.front if front_only else self.rows, self.cost_unit)

    def plot(self, path: str | Path) -> Path:
        return plot_front(self.rows, path, self.cost_unit)

    def save(self, directory: str | Path) -> Path:
        if self.program is None or self.config is None:
            raise UserError("no trial finished, so there is no program to save")
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        self.program.save(str(out / "program.json"))
        config = {"knobs": self.config.knobs, "trial": self.trial.number if self.trial else None}
        (out / "config.json").write_text(json.dumps(config, indent=2, default=str))
        (out / "front.txt").write_text(self.to_table() + "\n")
        return out


def load_tuned(directory: str | Path, program: Any) -> Any:
    """The tuned program saved in ``directory``, rebuilt from a base RLM or a factory."""
    path = Path(directory)
    if not (path / "program.json").exists():
        raise UserError(f"{path} holds no saved program (program.json)")
    knobs = (
        json.loads((path / "config.json").read_text()).get("knobs", {})
        if (path / "config.json").exists()
        else {}
    )
    config = Config(knobs=knobs)
    if hasattr(program, "named_predictors"):
        tuned = apply_config(program.deepcopy(), config)
    else:
        tuned = program(config)
    tuned.load(str(path / "program.json"))  # root instructions + demos, dspy.Module state
    return tuned

"""What the tuner searches: declared knobs, candidate root instructions, and demonstrations.

A ``SearchSpace`` is plain data. Each trial turns it into a ``Config`` (one value per knob,
one instruction, the first ``n_demos`` demos of a ranked pool), and a program factory turns
a ``Config`` into an RLM. Categorical choices are addressed by index inside optuna, so
long instruction texts never become parameter values and two workers sharing a study
agree on what "choice 2" means as long as they share the candidate list (the tuner keeps
it in the study).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rlmkit.errors import ConfigError, UserError

INSTRUCTION_PARAM = "instruction"
DEMOS_PARAM = "n_demos"


@dataclass(frozen=True)
class IntKnob:
    """An integer knob in ``[low, high]`` (e.g. ``max_iterations``, ``max_depth``)."""

    name: str
    low: int
    high: int
    step: int = 1
    log: bool = False

    def __post_init__(self) -> None:
        if self.low > self.high:
            raise ConfigError(f"knob {self.name!r}: low {self.low} > high {self.high}")

    def suggest(self, trial: Any) -> int:
        return trial.suggest_int(self.name, self.low, self.high, step=self.step, log=self.log)

    @property
    def searchable(self) -> bool:
        return self.high > self.low


@dataclass(frozen=True)
class FloatKnob:
    """A float knob in ``[low, high]`` (e.g. ``temperature``)."""

    name: str
    low: float
    high: float
    log: bool = False

    def __post_init__(self) -> None:
        if self.low > self.high:
            raise ConfigError(f"knob {self.name!r}: low {self.low} > high {self.high}")

    def suggest(self, trial: Any) -> float:
        return trial.suggest_float(self.name, self.low, self.high, log=self.log)

    @property
    def searchable(self) -> bool:
        return self.high > self.low


@dataclass(frozen=True)
class CategoricalKnob:
    """A knob with a few named choices (e.g. the sub-model, the protocol)."""

    name: str
    choices: tuple[Any, ...]

    def __post_init__(self) -> None:
        if not self.choices:
            raise ConfigError(f"knob {self.name!r} has no choices")
        object.__setattr__(self, "choices", tuple(self.choices))

    def suggest(self, trial: Any) -> Any:
        # Suggest an index: optuna only stores None/bool/int/float/str choices, ours may be anything.
        index = trial.suggest_categorical(self.name, list(range(len(self.choices))))
        return self.choices[index]

    @property
    def searchable(self) -> bool:
        return len(self.choices) > 1


Knob = IntKnob | FloatKnob | CategoricalKnob


@dataclass
class Config:
    """One point of the space: what a program factory needs to build a program."""

    knobs: dict[str, Any] = field(default_factory=dict)
    instruction: str | None = None  # None: keep the program's own instructions
    demos: list[Any] = field(default_factory=list)  # dspy.Example demos for the root predictor

    def summary(self, width: int = 48) -> dict[str, Any]:
        """Short, printable description (for tables and study attributes)."""
        text = self.instruction or ""
        short = text if len(text) <= width else text[: width - 3] + "..."
        knobs = {name: _printable(value, width) for name, value in self.knobs.items()}
        return {**knobs, "instruction": short, "n_demos": len(self.demos)}


@dataclass
class SearchSpace:
    """Knobs plus candidate instructions plus a ranked demo pool.

    ``instructions``: candidate root instructions (the tuner may add LM-proposed ones).
    ``demos``: a ranked pool; a trial uses its first ``n_demos`` (0..``max_demos``).
    """

    knobs: list[Knob] = field(default_factory=list)
    instructions: list[str] = field(default_factory=list)
    demos: list[Any] = field(default_factory=list)
    max_demos: int | None = None

    def __post_init__(self) -> None:
        names = [knob.name for knob in self.knobs]
        reserved = {INSTRUCTION_PARAM, DEMOS_PARAM} & set(names)
        if reserved:
            raise ConfigError(f"knob names {sorted(reserved)} are reserved for instructions/demos")
        if len(set(names)) != len(names):
            raise ConfigError(f"duplicate knob names in {names}")

    @property
    def demo_limit(self) -> int:
        cap = len(self.demos) if self.max_demos is None else min(self.max_demos, len(self.demos))
        return max(0, cap)

    def searchable(self) -> bool:
        return (
            any(knob.searchable for knob in self.knobs) or len(self.instructions) > 1 or self.demo_limit > 0
        )

    def require_searchable(self) -> None:
        if not self.searchable():
            raise UserError(
                "the search space has nothing to search: declare a knob with more than one value, "
                "two or more candidate instructions, demos, or give a proposer_lm"
            )

    def sample(self, trial: Any) -> Config:
        """Draw a Config from an optuna trial (fixed knobs are not suggested, just used)."""
        knobs = {}
        for knob in self.knobs:
            knobs[knob.name] = knob.suggest(trial) if knob.searchable else _only_value(knob)
        instruction = None
        if len(self.instructions) > 1:
            index = trial.suggest_categorical(INSTRUCTION_PARAM, list(range(len(self.instructions))))
            instruction = self.instructions[index]
        elif self.instructions:
            instruction = self.instructions[0]
        n_demos = trial.suggest_int(DEMOS_PARAM, 0, self.demo_limit) if self.demo_limit else 0
        return Config(knobs=knobs, instruction=instruction, demos=list(self.demos[:n_demos]))

    def config_from_params(self, params: dict[str, Any]) -> Config:
        """Rebuild the Config of a finished trial from its stored params."""
        knobs = {}
        for knob in self.knobs:
            if knob.name not in params:
                knobs[knob.name] = _only_value(knob)
            elif isinstance(knob, CategoricalKnob):
                knobs[knob.name] = knob.choices[params[knob.name]]
            else:
                knobs[knob.name] = params[knob.name]
        instruction = None
        if INSTRUCTION_PARAM in params:
            instruction = self.instructions[params[INSTRUCTION_PARAM]]
        elif self.instructions:
            instruction = self.instructions[0]
        n_demos = params.get(DEMOS_PARAM, 0)
        return Config(knobs=knobs, instruction=instruction, demos=list(self.demos[:n_demos]))


def _printable(value: Any, width: int) -> Any:
    """A knob value as stored in a study (JSON): plain values as they are, others as short text."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def _only_value(knob: Knob) -> Any:
    return knob.choices[0] if isinstance(knob, CategoricalKnob) else knob.low


# ------------------------------------------------------------------ building programs
ProgramFactory = Callable[[Config], Any]


def root_predictor(program: Any) -> Any:
    """The root ``dspy.Predict`` of an RLM (the one named 'root', else the only one)."""
    predictors = dict(program.named_predictors())
    if "root" in predictors:
        return predictors["root"]
    if len(predictors) == 1:
        return next(iter(predictors.values()))
    raise ConfigError(f"cannot tell the root predictor among {sorted(predictors)}")


def apply_config(program: Any, config: Config) -> Any:
    """Set a Config on ``program`` in place: root instructions, root demos, knob attributes."""
    root = root_predictor(program)
    if config.instruction is not None:
        root.signature = root.signature.with_instructions(config.instruction)
    root.demos = list(config.demos)
    for name, value in config.knobs.items():
        if not hasattr(program, name):
            raise ConfigError(f"{type(program).__name__} has no knob {name!r} to set")
        setattr(program, name, value)
    return program


def factory_from_base(base: Any) -> ProgramFactory:
    """A factory that copies ``base`` and applies a Config to the copy (base stays untouched)."""

    def build(config: Config) -> Any:
        program = base.deepcopy() if hasattr(base, "deepcopy") else copy.deepcopy(base)
        return apply_config(program, config)

    return build

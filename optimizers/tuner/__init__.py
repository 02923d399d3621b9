"""Optuna-based tuning of RLM programs: instructions, demos and knobs, for accuracy and cost."""

from optimizers.tuner.demos import ScoredRun, render_transcript, select_demos
from optimizers.tuner.evaluation import TrialFailure
from optimizers.tuner.proposer import propose_instructions
from optimizers.tuner.result import TuningResult, load_tuned
from optimizers.tuner.space import CategoricalKnob, Config, FloatKnob, IntKnob, SearchSpace, apply_config
from optimizers.tuner.tuner import Bootstrap, RLMTuner

__all__ = [
    "Bootstrap",
    "CategoricalKnob",
    "Config",
    "FloatKnob",
    "IntKnob",
    "RLMTuner",
    "ScoredRun",
    "SearchSpace",
    "TrialFailure",
    "TuningResult",
    "apply_config",
    "load_tuned",
    "propose_instructions",
    "render_transcript",
    "select_demos",
]

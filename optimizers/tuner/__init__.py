"""Optuna-based tuning of RLM programs: instructions, demos and knobs, for accuracy and cost."""

from optimizers.tuner.demos import ScoredRun, render_transcript, select_demos
from optimizers.tuner.evaluation import TrialFailure
from optimizers.tuner.instruction_proposer import propose_instructions
from optimizers.tuner.result import TuningResult, load_tuned
from optimizers.tuner.rlm_tuner import Bootstrap, RLMTuner
from optimizers.tuner.space import CategoricalKnob, Config, FloatKnob, IntKnob, SearchSpace, apply_config

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

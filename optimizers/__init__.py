"""Optimizers: tune RLM programs, compile trajectories into datasets, train through backends."""

from optimizers.compile import compile_dpo, compile_rl, compile_sft  # noqa: F401
from optimizers.tuner import (  # noqa: F401  # noqa: F401
    Bootstrap,
    CategoricalKnob,
    Config,
    FloatKnob,
    IntKnob,
    RLMTuner,
    SearchSpace,
    TuningResult,
    load_tuned,
)

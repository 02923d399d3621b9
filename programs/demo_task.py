"""What ``rlmkit demo`` runs, in one place, so the demo and its accuracy measurement
(``benchmarks/quality/demo_accuracy.py``) run the same task with the same program.

The task is the needle suite (RULER S-NIAH: one key's value hidden in essay prose, with
two distractor needles for other keys), the suite the embedded model answers best of
those that need an RLM (``benchmarks/results/local_quality.jsonl``). Each seed places the
gold needle at its own depth. The program is the plain
``rlmkit.RLM("context, question -> answer: str")``: no instructions written for the task
and no task code in any prompt (the embedded model's shipped program is generic too).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

DEMO_SUITE = "needle"
# 200,000 characters of prose: about 3x the 16,384 tokens the embedded model is served with.
DEMO_LENGTH = 200_000
# Tuning (scripts/tune_embedded.py) uses seeds below 1000 and the held-out evaluation
# (benchmarks/quality/local_quality.py) 1000 up; the demo's tasks come from further up still.
DEMO_SEED = 2000
DEMO_MAX_ITERATIONS = 6
# A run that makes more model calls than this (root turns and sub-calls) is cut and scored 0.
# A cap on calls, not seconds: it bounds the work the same way on an idle machine (a minute or
# two) and on a busy one, so a measurement says how the model does, not how busy the CPU was.
DEMO_MAX_CALLS = 30
# REPL output shown to the model per turn: small, because every character is prompt the CPU must read
DEMO_DISPLAY_OUTPUT_CHARS = 2_000
# A small model writes short turns; a provider's model keeps its own max_tokens.
EMBEDDED_MAX_TOKENS = 400


def demo_example(seed: int = DEMO_SEED, length: int = DEMO_LENGTH):
    """The demo's task for ``seed``: the gold needle at a depth the seed picks (0 = start, 1 = end)."""
    from programs.tasks import generate

    depth = round(random.Random(seed).random(), 2)
    return generate(DEMO_SUITE, n=1, length=length, seed=seed, depth=depth)[0]


def demo_rlm(model: Any, *, max_iterations: int = DEMO_MAX_ITERATIONS, log_dir: Path | None = None):
    """The demo's program: the plain RLM, nothing written for the task."""
    import rlmkit
    from rlmkit.prompting import Display

    return rlmkit.RLM(
        "context, question -> answer: str",
        lm=model,
        max_iterations=max_iterations,
        log_dir=log_dir,
        budget=rlmkit.Budget(max_calls=DEMO_MAX_CALLS),
        display=Display(max_output_chars=DEMO_DISPLAY_OUTPUT_CHARS),
    )


def window_multiple(context_chars: int, window_tokens: int) -> float:
    """How many times the model's window the context fills (at the baseline's characters a token)."""
    from programs.baseline import CHARS_PER_TOKEN

    return context_chars / CHARS_PER_TOKEN / window_tokens

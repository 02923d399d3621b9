"""Ready programs and task suites built from rlmkit + signatures.

    from programs import evaluate, program_for
    from programs.tasks import generate
    result = evaluate(lambda: program_for("needle", lm=lm), generate("needle", n=10, length=100_000))

Names load on first use, so ``programs.tasks`` (pure Python generators) never pays for dspy.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "evaluate": "programs.evaluate",
    "EvalResult": "programs.eval_results",
    "ExampleResult": "programs.eval_results",
    "program_for": "programs.suite_programs",
    "SPECS": "programs.suite_programs",
    "FactsThenAnswer": "programs.composed",
    "TallyThenAnswer": "programs.composed",
    "BaselineLM": "programs.baseline",
    "PROGRAMS": "programs.registry",
    "build_program": "programs.registry",
}

__all__ = [
    "PROGRAMS",
    "SPECS",
    "BaselineLM",
    "EvalResult",
    "ExampleResult",
    "FactsThenAnswer",
    "TallyThenAnswer",
    "build_program",
    "evaluate",
    "program_for",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'programs' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__

"""Seeded task generators with their benchmarks' own scoring rules.

    from programs.tasks import generate, score, SUITES
    examples = generate("aggregation", n=5, length=200_000, seed=0, labelled=True)
    score(examples[0], prediction)          # float in [0, 1]

Families (``SUITES``): needle (RULER S-NIAH), multi_needle (MRCR), aggregation (OOLONG),
pairs (OOLONG-Pairs), multihop (BrowseComp-Plus), codeqa (LongBench-v2 CodeQA), shared_context
(several aggregation questions over one context, asked in one session); and two of real text,
prose (a fact in the Python Language Reference and licence texts) and source (questions about
standard-library modules); and two of facts real text states with nothing inserted, code_facts
(the class of a method, a parameter's default, the enclosing function) and section_facts (the
heading a term is defined under). Seeds fall in three splits (``splits``: train, dev, test) and
the real-text families read each split's own documents.

A family is one module here defining ``SUITE = Suite(...)`` (generator, scorer, knobs and the
``ProgramRecipe`` that answers it: signature, strategy, typed sub-calls), plus its line in
``FAMILIES``. Everything else (``generate``, ``score``, ``program_for``, the CLI) reads it from there.
"""

from __future__ import annotations

import importlib
from typing import Any

from programs.tasks.base import (
    MAX_LENGTH,
    MIN_LENGTH,
    Example,
    LengthError,
    ProgramRecipe,
    Suite,
    TaskError,
    UnknownKnobError,
    UnknownSuiteError,
    prediction_value,
)

# The registry: one line per family, the name of its module in programs/tasks/.
FAMILIES = (
    "needle", "multi_needle", "aggregation", "pairs", "multihop", "codeqa", "shared_context",
    "prose", "source",  # real text: the language reference and licences; standard-library modules
    "code_facts", "section_facts",  # real text with nothing inserted: facts the documents' structure states
)  # fmt: skip


def _load_family(module_name: str) -> Suite:
    suite = getattr(importlib.import_module(f"programs.tasks.{module_name}"), "SUITE", None)
    if not isinstance(suite, Suite):
        raise TaskError(
            f"programs/tasks/{module_name}.py is listed in FAMILIES but defines no SUITE = Suite(...)"
        )
    return suite


SUITES: dict[str, Suite] = {suite.name: suite for suite in map(_load_family, FAMILIES)}


def get_suite(name: str) -> Suite:
    try:
        return SUITES[name]
    except KeyError:
        raise UnknownSuiteError(f"unknown suite {name!r}; known suites: {', '.join(SUITES)}") from None


def generate(suite: str, n: int = 1, length: int = 100_000, seed: int = 0, **knobs: Any) -> list[Example]:
    return get_suite(suite).generate(n, length, seed, **knobs)


def score(example: Example, prediction: Any) -> float:
    """Score ``prediction`` (a dspy.Prediction, a dict or a raw value) with its suite's rule."""
    return get_suite(example.suite).score(example, prediction)


def parse_knobs(suite: str, pairs_text: list[str]) -> dict[str, Any]:
    """``["k=4", "labelled=true"]`` -> typed knobs, checked against the suite's knobs."""
    spec = get_suite(suite)
    knobs: dict[str, Any] = {}
    for item in pairs_text:
        if "=" not in item:
            raise UnknownKnobError(f"knob {item!r} must look like name=value")
        name, raw = item.split("=", 1)
        name = name.strip()
        if name not in spec.knobs:
            raise UnknownKnobError(
                f"suite {suite!r} has no knob {name!r}; its knobs are: {', '.join(spec.knobs)}"
            )
        knobs[name] = _typed(raw.strip(), spec.knobs[name], spec.choices.get(name, ()))
    return knobs


def _typed(raw: str, default: Any, choices: tuple) -> Any:
    lowered = raw.lower()
    if lowered in ("none", "null"):
        return None
    if isinstance(default, bool) or any(isinstance(c, bool) for c in choices):
        if lowered in ("true", "1", "yes"):
            return True
        if lowered in ("false", "0", "no"):
            return False
    for cast in (int, float):
        try:
            return cast(raw)
        except ValueError:
            pass
    return raw


__all__ = [
    "FAMILIES",
    "MAX_LENGTH",
    "MIN_LENGTH",
    "SUITES",
    "Example",
    "LengthError",
    "ProgramRecipe",
    "Suite",
    "TaskError",
    "UnknownKnobError",
    "UnknownSuiteError",
    "generate",
    "get_suite",
    "parse_knobs",
    "prediction_value",
    "score",
]

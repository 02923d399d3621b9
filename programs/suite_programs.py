"""One ready RLM per task suite: the right typed signature, typed sub-calls and a short
strategy in the instructions (small models need the strategy spelled out). Each family's
recipe lives in its own module (``programs/tasks/<family>.py``, ``SUITE.program``).

    rlm = program_for("aggregation", lm="openai/gpt-4o-mini", sub_lm="openai/gpt-4o-mini")
    pred = rlm(**example.inputs)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import dspy

import rlmkit
from programs.tasks import SUITES, ProgramRecipe, get_suite
from programs.tasks.records import LABELS
from rlmkit.errors import ConfigError
from rlmkit.loading import load
from signatures import classifier

ClassifyInstance = classifier(LABELS)  # the records families' typed sub-call (tasks/records.py names it)


@dataclass(frozen=True)
class ProgramSpec:
    signature: type[dspy.Signature]
    instructions: str
    subcalls: dict[str, Any] = field(default_factory=dict)


def _spec(recipe: ProgramRecipe) -> ProgramSpec:
    return ProgramSpec(
        load(recipe.signature),
        recipe.instructions,
        {name: load(path) for name, path in recipe.subcalls.items()},
    )


# Every family's program, read from its SUITE (programs/tasks/<family>.py).
SPECS: dict[str, ProgramSpec] = {
    name: _spec(suite.program) for name, suite in SUITES.items() if suite.program is not None
}


# A task's program labels every distinct record with a sub-call, often far more than dspy.RLM's
# 50 per call; the run's Budget (500 LM calls unless given) is the cap its scores were measured under.
NO_PER_CALL_CAP = None


def program_for(suite: str, *, lm: Any = None, sub_lm: Any = None, **rlm_kwargs: Any) -> rlmkit.RLM:
    """The RLM for ``suite``; ``rlm_kwargs`` go to ``rlmkit.RLM`` (max_depth, budget, log_dir ...)."""
    get_suite(suite)  # unknown suite -> UnknownSuiteError before anything is built
    spec = SPECS.get(suite)
    if spec is None:
        raise ConfigError(
            f"task family {suite!r} has no program: give its SUITE a "
            f"program=ProgramRecipe(signature, instructions) in programs/tasks/{suite}.py"
        )
    instructions = f"{spec.signature.instructions.strip()}\n{spec.instructions}"
    rlm_kwargs.setdefault("max_llm_calls", NO_PER_CALL_CAP)
    return rlmkit.RLM(
        spec.signature,
        lm=lm,
        sub_lm=sub_lm,
        subcalls=dict(spec.subcalls),
        instructions=instructions,
        **rlm_kwargs,
    )


def plain_for(suite: str, *, lm: Any = None, sub_lm: Any = None, **rlm_kwargs: Any) -> rlmkit.RLM:
    """The suite's typed signature with neutral instructions in place of the signature's and the
    strategy's, and no typed sub-calls. What it keeps of the suite: the field names, their types
    and each field's description (the prompt shows the outputs' ones). What an RLM does with a task nobody
    wrote it for; ``program_for`` beside it shows what the written strategy adds."""
    get_suite(suite)
    signature = SPECS[suite].signature
    names = ", ".join(f"`{name}`" for name in signature.input_fields)
    outputs = ", ".join(f"`{name}`" for name in signature.output_fields)
    neutral = signature.with_instructions(f"Given the fields {names}, produce the fields {outputs}.")
    rlm_kwargs.setdefault("max_llm_calls", NO_PER_CALL_CAP)
    return rlmkit.RLM(neutral, lm=lm, sub_lm=sub_lm, **rlm_kwargs)

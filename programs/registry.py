"""Programs by name, for the CLI: ``rlm`` (the suite's own RLM, whose instructions know the
suite), ``plain`` (the same signature with neutral instructions: ``plain_for``) and the composed ones."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from programs.baseline import BaselineLM
from programs.composed import FactsThenAnswer, TallyThenAnswer
from programs.suite_programs import SPECS, plain_for, program_for
from programs.tasks import get_suite
from rlmkit.errors import ConfigError

# name -> (suites it answers, builder(suite, **kwargs))
PROGRAMS: dict[str, tuple[tuple[str, ...], Callable[..., Any]]] = {
    "rlm": (tuple(SPECS), lambda suite, **kw: program_for(suite, **kw)),
    "plain": (tuple(SPECS), lambda suite, **kw: plain_for(suite, **kw)),
    "facts_then_answer": (("multihop",), lambda suite, **kw: FactsThenAnswer(**kw)),
    "tally_then_answer": (("aggregation",), lambda suite, **kw: TallyThenAnswer(**kw)),
}


def build_program(name: str, suite: str, **kwargs: Any) -> Any:
    """Build program ``name`` for ``suite`` (kwargs: lm, sub_lm, max_depth, max_iterations, budget ...)."""
    get_suite(suite)
    if name not in PROGRAMS:
        raise ConfigError(f"unknown program {name!r}; choose one of {list(PROGRAMS)}")
    suites, build = PROGRAMS[name]
    if suite not in suites:
        raise ConfigError(f"program {name!r} answers {list(suites)}, not {suite!r}")
    return build(suite, **kwargs)


def baseline_for(suite: str, *, lm: Any, window_tokens: int | None = None) -> BaselineLM:
    kwargs = {"window_tokens": window_tokens} if window_tokens else {}
    return BaselineLM(SPECS[suite].signature, lm=lm, **kwargs)

"""dspy.RLM's constructor keywords read into rlmkit's own.

Both spellings of one knob (``max_iters`` / ``max_iterations``, ``max_output_chars`` /
``display.max_output_chars``) are accepted; given both with different values is a mistake
that would otherwise be settled silently by whichever wins, so it is an error.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from rlmkit.errors import ConfigError
from rlmkit.prompting import Display
from rlmkit.sandbox.interpreter import is_interpreter

DEFAULT_MAX_ITERATIONS = 20


def one_value(name: str, value: Any, dspy_name: str, dspy_value: Any, default: Any) -> Any:
    if value is not None and dspy_value is not None and value != dspy_value:
        raise ConfigError(
            f"{name}={value!r} and {dspy_name}={dspy_value!r} set the same knob to different values; "
            f"pass one of them"
        )
    return next((v for v in (value, dspy_value) if v is not None), default)


def max_iterations(max_iterations: int | None, max_iters: int | None) -> int:
    return one_value("max_iterations", max_iterations, "max_iters", max_iters, DEFAULT_MAX_ITERATIONS)


def display(display: Display | None, max_output_chars: int | None) -> Display:
    """``display`` with ``max_output_chars`` (REPL output shown to the model per turn) applied."""
    base = display or Display()
    if max_output_chars is None:
        return base
    given = display.max_output_chars if display is not None else None
    chars = one_value("display.max_output_chars", given, "max_output_chars", max_output_chars, None)
    if not isinstance(chars, int) or chars < 1:
        raise ConfigError(f"max_output_chars must be an integer >= 1, got {chars!r}")
    return dataclasses.replace(base, max_output_chars=chars)


def interpreter_factory(factory: Any) -> Any:
    """dspy.RLM's check: a zero-argument callable that makes an interpreter, not an interpreter."""
    if factory is None:
        return None
    if is_interpreter(factory):
        raise TypeError(
            "interpreter_factory takes a zero-argument callable that creates an interpreter, not an "
            "interpreter: pass the interpreter as the first positional argument when calling the module, "
            "or interpreter_factory=lambda: interpreter"
        )
    if not callable(factory):
        raise TypeError(f"interpreter_factory must be callable, got {type(factory).__name__}")
    return factory


class InterpreterKeywordError(ConfigError, TypeError):
    """``rlm(..., interpreter=x)`` where the signature has no ``interpreter`` input (a TypeError,
    as dspy.RLM raises): the interpreter is the call's first positional argument."""


def refuse_interpreter_keyword(inputs: dict[str, Any], input_fields: Any) -> None:
    if "interpreter" in inputs and "interpreter" not in input_fields:
        raise InterpreterKeywordError(
            "interpreter= is not a keyword of an RLM call: pass the interpreter as the first "
            "positional argument, rlm(interpreter, ...), or build the RLM with interpreter_factory=..."
        )

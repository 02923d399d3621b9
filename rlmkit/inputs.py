"""What a caller's input becomes in the REPL: a Path its text, a dspy.History its plain messages;
anything else must pickle (the worker rebuilds it with the standard library only)."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import dspy

from rlmkit.errors import ContextError


def load_input(name: str, value: Any) -> Any:
    """A Path becomes its text (a file) or ``{relative path: text}`` (a directory)."""
    if isinstance(value, Path):
        if value.is_file():
            return value.read_text(errors="replace")
        if value.is_dir():
            return {
                str(p.relative_to(value)): p.read_text(errors="replace")
                for p in sorted(value.rglob("*"))
                if p.is_file()
            }
        raise ContextError(f"input {name!r}: path {value} does not exist")
    if isinstance(value, (str, bytes, int, float, bool, type(None))):
        return value
    if isinstance(value, dspy.History):  # the REPL has only the standard library: plain messages
        return [dict(message) for message in value.messages]
    try:
        pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:
        raise ContextError(
            f"input {name!r} of type {type(value).__name__} cannot be sent to the sandbox: {exc}"
        ) from None
    return value

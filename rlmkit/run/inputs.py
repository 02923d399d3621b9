"""A call's inputs: checked against the signature in one place and one wording (``RunInputs``,
for a plain call and a session's alike), and what each becomes in the REPL (``load_input``: a
Path its text, a dspy.History its plain messages; anything else must pickle, since the worker
rebuilds it with the standard library only)."""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dspy

from rlmkit.errors import ContextError, MissingInputError
from rlmkit.prompting import Display
from rlmkit.signature import signature_text


@dataclass(frozen=True)
class RunInputs:
    """A run's inputs, checked against its signature before any model call: ``values`` as given,
    ``variables`` as the REPL gets them, ``aliases`` (``context`` names the first long input)."""

    values: dict[str, Any]
    variables: dict[str, Any]
    aliases: dict[str, str]

    @classmethod
    def check(
        cls, signature: Any, inputs: dict[str, Any], display: Display, loaded: bool = False
    ) -> RunInputs:
        """``loaded``: every value is ``load_input``'s already (a session loads each input once,
        as it is given), so none is read or pickled again."""
        missing = [name for name in signature.input_fields if name not in inputs]
        if missing:  # the wording is dspy.RLM's: DSPy users match on it
            raise MissingInputError(
                f"Missing required inputs: {missing} (signature {signature_text(signature)!r})"
            )
        check_known(signature, inputs)
        variables = {
            name: inputs[name] if loaded else load_input(name, inputs[name])
            for name in signature.input_fields
        }
        aliases: dict[str, str] = {}
        if "context" not in variables:
            long_inputs = [n for n, v in variables.items() if _size(v) > display.full_input_chars]
            if long_inputs:
                aliases["context"] = long_inputs[0]
        return cls(dict(inputs), variables, aliases)


def check_known(signature: Any, inputs: dict[str, Any]) -> None:
    """``MissingInputError`` for an input the signature does not declare (a session checks the
    inputs it opens with here: the rest may come with its calls)."""
    unknown = sorted(name for name in inputs if name not in signature.input_fields)
    if unknown:  # the wording is dspy.RLM's too
        raise MissingInputError(
            f"Unexpected inputs not declared in the signature: {unknown} "
            f"(the signature takes {list(signature.input_fields)})"
        )


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


def _size(value: Any) -> int:
    return len(value) if hasattr(value, "__len__") else 0


__all__ = ["RunInputs", "check_known", "load_input"]

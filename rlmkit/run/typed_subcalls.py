"""Typed sub-calls: a dspy.Signature given to ``RLM(subcalls={...})`` becomes a function in the
REPL (``classify(text=...) -> validated value``). This module holds what one is (its doc line,
its messages to the sub-model, the parse and validation of the reply) and how ``subcalls={...}``
splits into typed sub-calls and plain tools; ``rlmkit.run.subcalls.SubcallHost`` runs them.
"""

from __future__ import annotations

import json
import re
import types
from collections.abc import Callable
from typing import Any

import dspy

from rlmkit.errors import UserError
from rlmkit.prompting import TYPED_CALL_DOC, TYPED_CALL_SYSTEM
from rlmkit.signature import OutputValidator, describe_outputs, field_desc, make_signature, type_name
from rlmkit.trajectory import bounded

# The functions the REPL provides under every protocol (rlmkit's and dspy's spellings): a sub-call
# or tool by one of these names would replace it.
REPL_FUNCTIONS = frozenset(
    {"llm_query", "llm_query_batched", "rlm_query", "rlm_query_batched"}
    | {"SUBMIT", "FINAL", "FINAL_VAR", "SHOW_VARS", "answer"}
)


class TypedSubcall:
    """A dspy.Signature used as a function in the REPL: ``classify(text=...) -> validated value``."""

    def __init__(self, name: str, signature: Any):
        if not name.isidentifier():
            raise UserError(f"sub-call name {name!r} is not a Python identifier")
        self.name = name
        self.sig = make_signature(signature)
        self.validator = OutputValidator(self.sig)
        self.inputs = list(self.sig.input_fields)

    def doc(self) -> str:
        args = ", ".join(f"{n}: {type_name(f.annotation)}" for n, f in self.sig.input_fields.items())
        outs = describe_outputs(self.sig)
        ret = (
            next(iter(outs.values()))
            if len(outs) == 1
            else "object with " + ", ".join(f".{k}: {v}" for k, v in outs.items())
        )
        return TYPED_CALL_DOC.format(
            call=f"{self.name}({args})",
            returns=ret,
            instructions=self.sig.instructions.strip(),
            name=self.name,
        )

    def messages(self, kwargs: dict[str, Any]) -> list[dict[str, str]]:
        missing = [n for n in self.inputs if n not in kwargs]
        unknown = [n for n in kwargs if n not in self.inputs]
        if missing or unknown:
            raise TypeError(f"{self.name}() takes {self.inputs}; missing {missing}, unexpected {unknown}")
        spec = "\n".join(f'- "{name}": {desc}' for name, desc in describe_outputs(self.sig).items())
        system = TYPED_CALL_SYSTEM.format(instructions=self.sig.instructions.strip(), keys=spec)
        user = "\n\n".join(
            f"{name}"
            + (
                f" ({field_desc(self.sig.input_fields[name])})"
                if field_desc(self.sig.input_fields[name])
                else ""
            )
            + f":\n{value}"
            for name, value in kwargs.items()
        )
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def parse(self, text: str) -> Any:
        """The validated value (one output) or a SimpleNamespace of them (several)."""
        match = re.search(r"\{.*\}", text or "", re.DOTALL)
        data: object
        if match is None:
            if len(self.validator.fields) == 1:  # a bare value is fine for one field
                data = {self.validator.fields[0]: (text or "").strip().strip("`").strip()}
            else:
                raise ValueError(f"{self.name}: reply has no JSON object: {bounded(text or '', 200)!r}")
        else:
            try:
                data = json.loads(match.group(0))
            except ValueError:
                import json_repair  # ships with dspy; only needed for malformed replies

                data = json_repair.loads(match.group(0))
        if not isinstance(data, dict):
            raise ValueError(f"{self.name}: expected a JSON object, got {type(data).__name__}")
        typed = self.validator.validate({k: v for k, v in data.items() if k in self.validator.fields})
        if len(typed) == 1:
            return next(iter(typed.values()))
        return types.SimpleNamespace(**typed)


def make_typed_subcalls(
    subcalls: dict[str, Any] | None,
) -> tuple[dict[str, TypedSubcall], dict[str, Callable[..., Any]]]:
    """Split user sub-calls into typed ones (dspy.Signature) and plain tools (callables)."""
    typed: dict[str, TypedSubcall] = {}
    tools: dict[str, Callable[..., Any]] = {}
    for name, value in (subcalls or {}).items():
        if name in REPL_FUNCTIONS:
            raise UserError(f"sub-call name {name!r} is reserved by rlmkit")
        if isinstance(value, (str, type)) and (isinstance(value, str) or issubclass(value, dspy.Signature)):
            typed[name] = TypedSubcall(name, value)
        elif callable(value):
            if not name.isidentifier():
                raise UserError(f"tool name {name!r} is not a Python identifier")
            tools[name] = value
        else:
            raise UserError(f"sub-call {name!r} must be a dspy.Signature (or its string) or a callable")
    return typed, tools

"""Signatures: turning a dspy signature into field lists, type names and output validation."""

from __future__ import annotations

import json
import re
from typing import Any, get_args, get_origin

import dspy
from pydantic import ConfigDict, PydanticUserError, TypeAdapter, ValidationError

from rlmkit.errors import SignatureError


def make_signature(signature: str | type[dspy.Signature]) -> type[dspy.Signature]:
    """A dspy.Signature class from a string or class, refusing ones an RLM cannot use."""
    if isinstance(signature, type) and issubclass(signature, dspy.Signature):
        sig = signature
    elif isinstance(signature, str):
        if "->" not in signature:
            raise SignatureError(
                f"signature {signature!r} needs 'inputs -> outputs', e.g. 'context, question -> answer'"
            )
        try:
            sig = dspy.Signature(signature)
        except Exception as exc:  # dspy raises several types for a bad string
            raise SignatureError(f"cannot parse signature {signature!r}: {exc}") from exc
    else:
        raise SignatureError(
            f"signature must be a string or a dspy.Signature class, got {type(signature).__name__}"
        )
    if not sig.output_fields:
        raise SignatureError(f"signature {signature_text(sig)!r} has no output fields")
    if not sig.input_fields:
        raise SignatureError(f"signature {signature_text(sig)!r} has no input fields")
    return sig


def signature_text(sig: type[dspy.Signature]) -> str:
    def part(fields: dict[str, Any]) -> str:  # dspy's field objects: untyped
        return ", ".join(f"{name}: {type_name(f.annotation)}" for name, f in fields.items())

    return f"{part(sig.input_fields)} -> {part(sig.output_fields)}"


def type_name(annotation: Any) -> str:
    if annotation is None:
        return "str"
    if get_origin(annotation) is None:
        return getattr(annotation, "__name__", str(annotation))
    return re.sub(r"\btyping\.", "", str(annotation))


def field_desc(field: Any) -> str:
    extra = getattr(field, "json_schema_extra", None) or {}
    desc = extra.get("desc", "") if isinstance(extra, dict) else ""
    return "" if desc.startswith("${") else desc


def describe_outputs(sig: type[dspy.Signature]) -> dict[str, str]:
    """``{name: "type — description"}`` for prompts."""
    out = {}
    for name, field in sig.output_fields.items():
        desc = field_desc(field)
        out[name] = type_name(field.annotation) + (f" ({desc})" if desc else "")
    return out


class OutputValidator:
    """Validates raw output values against the signature's annotations with pydantic (lax mode)."""

    def __init__(self, sig: type[dspy.Signature]):
        self.fields = list(sig.output_fields)
        self._adapters = {
            name: (field.annotation or str, _lenient_adapter(field.annotation or str))
            for name, field in sig.output_fields.items()
        }

    def validate(self, outputs: dict[str, Any]) -> dict[str, Any]:
        """Typed outputs, or ValueError naming each missing / wrong field (fed back to the model)."""
        missing = [name for name in self.fields if name not in outputs]
        unknown = [name for name in outputs if name not in self._adapters]
        problems = []
        if missing:
            problems.append(f"missing output field(s) {missing}")
        if unknown:
            problems.append(f"unknown field(s) {unknown}; the outputs are {self.fields}")
        typed: dict[str, Any] = {}
        for name, value in outputs.items():
            if name not in self._adapters:
                continue
            annotation, adapter = self._adapters[name]
            try:
                typed[name] = _validate(adapter, value, annotation)
            except ValidationError as exc:
                detail = "; ".join(err["msg"] for err in exc.errors()[:3])
                problems.append(f"{name} must be {type_name(annotation)}, got {_short(value)}: {detail}")
        if problems:
            raise ValueError("invalid outputs: " + " | ".join(problems))
        return typed


# Numbers where strings are wanted, at any depth: a model that found "9709219" often writes
# SUBMIT(answer=[9709219]) for a list[str] field, and strict rejection sends it round in circles.
_LENIENT = ConfigDict(coerce_numbers_to_str=True)
# Collections one lone value can stand for: a one-item list of it.
_SEQUENCES = (list, set, frozenset)


def _lenient_adapter(annotation: Any) -> TypeAdapter[Any]:
    try:
        return TypeAdapter(annotation, config=_LENIENT)
    except PydanticUserError:  # a pydantic model keeps its own config
        return TypeAdapter(annotation)


def _validate(adapter: TypeAdapter[Any], value: object, annotation: Any) -> Any:
    """The typed value; a lone scalar given for a list field is read as a one-item list."""
    coerced = _coerce(value, annotation)
    try:
        return adapter.validate_python(coerced)
    except ValidationError as first:
        if get_origin(annotation) not in _SEQUENCES or isinstance(coerced, (list, tuple, set, dict)):
            raise
        try:
            return adapter.validate_python([coerced])
        except ValidationError:
            raise first from None  # the model is told what was wrong with what it wrote


def _coerce(value: Any, annotation: Any) -> Any:
    """Friendly coercions pydantic's lax mode does not do: str for str fields, JSON for others."""
    if annotation is str and not isinstance(value, str):
        return (
            value if value is None else (json.dumps(value) if isinstance(value, (dict, list)) else str(value))
        )
    if isinstance(value, str) and annotation is not str:
        text = value.strip()
        if (
            get_origin(annotation) in (list, dict, tuple)
            or annotation in (list, dict, bool)
            or get_args(annotation)
        ):
            try:
                return json.loads(text)
            except ValueError:
                return text
        return text
    return value


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."

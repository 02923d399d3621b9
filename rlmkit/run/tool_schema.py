"""A tool's call from the REPL, checked against its JSON Schema on the host before it leaves.

MCP servers' tools (``mcp_tools.py``) and the client's function tools (``client_tools.py``) take
their arguments the same way: keywords, or positions in the order of the schema's properties. A
call that does not match is a ``ValueError`` in the REPL that names the tool, what is wrong and
the signature it expects, so the model can fix its code; nothing is sent and nothing is counted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def check_arguments(
    name: str, schema: Mapping[str, Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> dict[str, Any]:
    """The call's arguments as the schema names them, checked against it (``ValueError``)."""
    import jsonschema

    names = list(schema.get("properties", {}))
    if len(args) > len(names):
        raise ValueError(f"{name}() takes at most {len(names)} positional arguments ({args!r} given)")
    given = dict(zip(names, args))
    if both := sorted(set(given) & set(kwargs)):
        raise ValueError(f"{name}() got {both} both by position and by name")
    arguments = {**given, **kwargs}
    errors = sorted(jsonschema.Draft202012Validator(dict(schema)).iter_errors(arguments), key=str)
    if errors:
        problems = "; ".join(f"{_where(e)}: {e.message}" for e in errors[:3])
        raise ValueError(
            f"{name}(): arguments do not match the tool's input schema ({problems}); "
            f"expected {signature(name, schema)}"
        )
    return arguments


def _where(error: Any) -> str:
    return "/".join(map(str, error.absolute_path)) or "arguments"


def signature(name: str, schema: Mapping[str, Any]) -> str:
    """``name(a: string, b: integer = ...)``: how the system prompt and errors show the tool."""
    props, required = schema.get("properties", {}), set(schema.get("required", ()))
    shown = [f"{n}: {p.get('type', 'any')}" + ("" if n in required else " = ...") for n, p in props.items()]
    return f"{name}({', '.join(shown)})"


__all__ = ["check_arguments", "signature"]

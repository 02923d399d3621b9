"""``load("package.module:attribute")``: how rlmkit names code in data (a job's scorer, a
backend, a sandbox, a program's signature) and finds it again."""

from __future__ import annotations

import importlib
from typing import Any

from rlmkit.errors import ConfigError


def load(spec: str) -> Any:
    """The object ``spec`` names: ``"package.module:attribute"``, the attribute possibly dotted
    (``"module:Class.method"``). A ConfigError says which part is wrong."""
    module_name, _, attribute = spec.partition(":") if isinstance(spec, str) else ("", "", "")
    if not module_name or not attribute:
        raise ConfigError(f"{spec!r} must look like 'package.module:function'")
    try:
        found: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"cannot import {spec!r}: {exc}") from exc
    return found


__all__ = ["load"]

"""REPL sandboxes: where the root model's code runs.

``make_sandbox(name, limits)`` builds one by name:
- ``process`` (default): a confined worker process per run (see ``confine.py`` for what is
  and is not a security boundary; ``sandbox.protections`` says what is active here).
- ``inline``: ``exec`` in the host process, for debugging only. No isolation at all.
- ``monty``: pydantic-monty's Rust interpreter (optional extra ``monty``), when installed.
"""

from __future__ import annotations

from rlmkit.errors import ConfigError
from rlmkit.sandbox.base import CellResult, HostFunction, Sandbox, SandboxLimits


def _process(limits: SandboxLimits | None) -> Sandbox:
    from rlmkit.sandbox.process import ProcessSandbox

    return ProcessSandbox(limits)


def _inline(limits: SandboxLimits | None) -> Sandbox:
    from rlmkit.sandbox.inline import InlineSandbox

    return InlineSandbox(limits)


def _monty(limits: SandboxLimits | None) -> Sandbox:
    from rlmkit.sandbox.monty import MontySandbox

    return MontySandbox(limits)


BACKENDS = {"process": _process, "inline": _inline, "monty": _monty}


def make_sandbox(name: str = "process", limits: SandboxLimits | None = None) -> Sandbox:
    """A new, unstarted sandbox of backend ``name``; ConfigError for an unknown name."""
    try:
        factory = BACKENDS[name]
    except (KeyError, TypeError):
        raise ConfigError(f"unknown sandbox {name!r}; known: {', '.join(BACKENDS)}") from None
    return factory(limits)


__all__ = ["BACKENDS", "CellResult", "HostFunction", "Sandbox", "SandboxLimits", "make_sandbox"]

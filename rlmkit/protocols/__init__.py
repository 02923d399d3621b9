"""Protocols: the prompt text and the rule for how a run ends, chosen by name."""

from __future__ import annotations

from rlmkit.errors import ConfigError
from rlmkit.protocols.answer import AnswerProtocol
from rlmkit.protocols.base import (
    CODE_BLOCK,
    REPL_PROMPT,
    Answer,
    Parsed,
    Protocol,
    find_code_blocks,
    strip_code_blocks,
)
from rlmkit.protocols.final import FinalProtocol
from rlmkit.protocols.submit import SubmitProtocol

PROTOCOLS: dict[str, type[Protocol]] = {
    "submit": SubmitProtocol,
    "final": FinalProtocol,
    "answer": AnswerProtocol,
}


def get_protocol(protocol: str | Protocol) -> Protocol:
    """A fresh protocol object for a name (or the object itself, for a customised prompt)."""
    if isinstance(protocol, Protocol):
        return protocol
    try:
        return PROTOCOLS[protocol]()
    except (KeyError, TypeError):
        raise ConfigError(f"unknown protocol {protocol!r}; choose one of {sorted(PROTOCOLS)}") from None


__all__ = [
    "CODE_BLOCK",
    "PROTOCOLS",
    "REPL_PROMPT",
    "Answer",
    "Parsed",
    "Protocol",
    "find_code_blocks",
    "get_protocol",
    "strip_code_blocks",
]

"""What a scripted model writes: the reply shapes the tests script, in one place."""

from __future__ import annotations


def repl(*lines: str) -> str:
    """A reply holding one ```repl block of ``lines``."""
    return "```repl\n" + "\n".join(lines) + "\n```"

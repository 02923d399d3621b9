"""Waiting for a state, never for a while: poll a condition until it holds or a deadline passes."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest


def wait_for(
    condition: Callable[[], object], what: str = "the awaited state", timeout: float = 10.0
) -> float:
    """Poll ``condition`` until it holds and return when it did (``time.monotonic()``); fail the test
    naming ``what`` if it does not hold within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout:.1f} s")
        time.sleep(0.01)
    return time.monotonic()

"""Typed errors of the dataset compilers (all are ``UserError``: the caller's input must change)."""

from __future__ import annotations

from typing import Any

from rlmkit.errors import UserError


class MixedSignaturesError(UserError):
    """Runs of more than one signature were given to one compile (group them or pick one)."""


class EmptyDatasetError(UserError):
    """No run or sample survived the filters; the message says which filter removed what, and
    ``report`` (a ``CompileReport``) counts it."""

    def __init__(self, message: str, report: Any = None):
        super().__init__(message)
        self.report = report


class DatasetValidationError(UserError):
    """Rows that training libraries would accept silently but train wrongly on."""

    def __init__(self, message: str, problems: list[str]):
        super().__init__(message)
        self.problems = problems

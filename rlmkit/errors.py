"""Typed errors for rlmkit.

Three families, kept apart so callers can tell who has to act:
- ``UserError``: the caller passed something wrong; raised before any LM call where possible.
- ``RunError``: a run failed part-way; it carries the partial trajectory so nothing is lost.
- ``LMError``: the model provider failed (after retries), or could not be reached.

``Finish`` is a BaseException so that the model's own ``except Exception`` in REPL code
cannot swallow the signal that the run is over.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a failed run's record, for readers and tools (nothing here reads it)
    from rlmkit.trajectory import Trajectory

# The distribution's name. ``rlmkit`` on the package index is an unrelated project, so
# nothing may tell a user to install that; the import name and the command stay ``rlmkit``.
DISTRIBUTION = "dspy-rlmkit"
# dspy-rlmkit is not on the package index yet: every hint installs from a checkout of the
# repository (or a wheel built from one), which is what works today.
NOT_ON_INDEX = f"{DISTRIBUTION} is not on the package index yet"


def install_hint(*extras: str, reinstall: bool = False) -> str:
    """The command that installs optional extras today: from a checkout of this repository."""
    spec = f"[{','.join(extras)}]" if extras else ""
    pip = "pip install --force-reinstall" if reinstall else "pip install"
    return f"{pip} -e '.{spec}' in a checkout of rlmkit ({NOT_ON_INDEX})"


class RLMKitError(Exception):
    """Base class of every error rlmkit raises on purpose."""


# ---------------------------------------------------------------- user mistakes
class UserError(RLMKitError, ValueError):
    """The caller passed something rlmkit cannot use. Raised before any LM call."""


class SignatureError(UserError):
    """A signature that cannot drive an RLM (no outputs, unparseable, ...)."""


class MissingInputError(UserError):
    """An input field of the signature was not given at call time."""


class ContextError(UserError):
    """A context that cannot be sent into the sandbox (not serialisable, missing path, ...)."""


class ConfigError(UserError):
    """An unknown protocol / sandbox / backend name, or an inconsistent option."""


class SessionFileError(UserError):
    """A session directory that cannot be loaded (corrupt, foreign, newer); ``path`` names the file."""

    def __init__(self, message: str, *, path: str | os.PathLike[str]):
        super().__init__(f"{path}: {message}")
        self.path = path


class SessionBusyError(UserError):
    """A session runs one call at a time: a call was made while another was running."""


class SessionClosedError(UserError):
    """A call on a session that was closed."""


# ---------------------------------------------------------------- provider failures
class LMError(RLMKitError):
    """A model call failed. ``model`` names the model; never includes API keys."""

    trajectory: Trajectory | None = None  # set when the failure ended a run: everything finished before it

    def __init__(self, message: str, *, model: str | None = None, status: int | None = None):
        super().__init__(message)
        self.model = model
        self.status = status


class LMConfigError(LMError, UserError):
    """An unknown model string, a missing provider key, a bad api_base."""


class LMUnavailableError(LMError):
    """The provider could not be reached, or retries were exhausted."""

    @staticmethod
    def recorded_in(failure: str | None, error: str | None) -> bool:
        """Whether an evaluation row's failure (its kind, and ``"Type: message"``) is this error:
        a run whose model never answered, which measured nothing about the program."""
        return failure == "lm_error" and (error or "").startswith("LMUnavailableError:")


class LocalModelError(LMError):
    """The embedded model could not be assembled, verified or started."""


# ---------------------------------------------------------------- run failures
class RunError(RLMKitError):
    """A run ended without a valid answer. ``trajectory`` holds everything finished so far."""

    def __init__(self, message: str, *, trajectory: Trajectory | None = None):
        super().__init__(message)
        self.trajectory = trajectory


class BudgetExceeded(RunError):
    """A limit of the shared Budget was reached (``kind``: calls, tokens, cost, seconds, depth)."""

    def __init__(
        self, message: str, *, kind: str, limit: float, used: float, trajectory: Trajectory | None = None
    ):
        super().__init__(message, trajectory=trajectory)
        self.kind = kind
        self.limit = limit
        self.used = used


class MaxIterationsError(RunError):
    """The root ran ``max_iterations`` turns and the final extraction failed too."""


class SandboxError(RunError):
    """The sandbox could not start or died in a way a restart could not repair."""


class McpServerError(RunError):
    """An MCP server of ``mcp_servers=`` could not be reached, or did not list its tools."""


class RunCancelled(RunError):
    """The caller stopped the run (``SessionRun.cancel``); it ended between turns, keeping what it
    had finished: its turns in the trajectory, its variables in the session's REPL."""


class ToolResultTimeout(RunError):
    """A client tool's call waited longer than the run allows for the client's result."""


class PrefixNotReproduced(RunError):
    """A run continuing a recorded one (``rlmkit.run.replay``) was sent a prompt the recorded run
    never saw: its code printed something else when it ran again, or a sub-call answered otherwise."""


# ---------------------------------------------------------------- control flow
class Finish(BaseException):  # noqa: N818 - a signal, not an error
    """Raised inside the REPL to end a cell once an answer is submitted."""

    def __init__(self, value: object = None):  # the submitted answer, whatever the model gave
        super().__init__("finish")
        self.value = value


__all__ = [
    "RLMKitError",
    "UserError",
    "SignatureError",
    "MissingInputError",
    "ContextError",
    "ConfigError",
    "SessionFileError",
    "SessionBusyError",
    "SessionClosedError",
    "LMError",
    "LMConfigError",
    "LMUnavailableError",
    "LocalModelError",
    "RunError",
    "BudgetExceeded",
    "MaxIterationsError",
    "SandboxError",
    "McpServerError",
    "RunCancelled",
    "ToolResultTimeout",
    "PrefixNotReproduced",
    "Finish",
]

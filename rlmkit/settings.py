"""Every knob of an RLM in one frozen object.

``RLM(...)`` builds a ``RunSettings``; ``child()`` derives its own from it; ``dump_state`` /
``load_state`` serialise it; ``RunMeta.limits`` records its numeric knobs. Adding a knob is
a field here (checked in ``__post_init__`` if it needs a check) plus the constructor's
keyword in ``rlm.py``; nothing else copies knobs by hand.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any  # Any: a saved program's state is plain JSON, read back field by field

from rlmkit.budget import DEFAULT_MAX_CALLS, Budget, Spending
from rlmkit.errors import ConfigError, UserError
from rlmkit.prompting import Display
from rlmkit.protocols import Protocol, get_protocol
from rlmkit.sandbox import BACKENDS as SANDBOXES
from rlmkit.sandbox.base import SandboxLimits

DEFAULT_MAX_LLM_CALLS = 50

# Output caps when an RLM is given none. Reasoning models spend part of the cap thinking, so
# API models get room; the embedded model's LM sets a tighter cap of its own (the smaller wins,
# ``run/model_call.py``).
TURN_MAX_TOKENS = 8192
SUBCALL_MAX_TOKENS = 4096


@dataclass(frozen=True)
class RunSettings:
    """How an RLM runs (``RLM``'s docstring says what each knob does). Frozen: change one with ``replace``."""

    max_iterations: int = 20
    # Sub-LM calls (llm_query and batches) one call may make; past it the REPL code gets a
    # RuntimeError it can handle. 50 is dspy.RLM's default, so a program moved from dspy.RLM
    # keeps its cap. None: no such cap; the Budget stays the hard one either way.
    max_llm_calls: int | None = DEFAULT_MAX_LLM_CALLS
    max_depth: int = 1
    cell_timeout: float | None = 60.0
    max_concurrency: int = 16
    max_tokens: int | None = TURN_MAX_TOKENS  # output cap of a root turn
    sub_max_tokens: int | None = SUBCALL_MAX_TOKENS  # output cap of a sub-call
    # Code blocks run per root turn (None: all). 1 also stops the reply at its first block's
    # closing fence: small models otherwise write a block, then its invented output, then SUBMIT.
    blocks_per_turn: int | None = None
    # An answer given in a turn whose code also printed output waits until the model has read
    # that output and answers the same again (guards.AnswerHold). Off by default: it costs a turn
    # whenever a model prints and answers together.
    hold_unread_answers: bool = False
    sandbox: str = "process"
    protocol: Protocol = field(default_factory=lambda: get_protocol("submit"))
    # No budget given: a default call cap guards the wallet (Budget() explicitly: no cap).
    budget: Budget = field(default_factory=lambda: Budget(max_calls=DEFAULT_MAX_CALLS))
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    display: Display = field(default_factory=Display)

    def __post_init__(self) -> None:
        object.__setattr__(self, "protocol", get_protocol(self.protocol))  # a name becomes its object
        if self.sandbox not in SANDBOXES:
            raise ConfigError(f"unknown sandbox {self.sandbox!r}; choose one of {list(SANDBOXES)}")
        for name, optional in (
            ("max_iterations", False),
            ("max_llm_calls", True),
            ("max_depth", False),
            ("max_concurrency", False),
            ("max_tokens", True),
            ("sub_max_tokens", True),
            ("blocks_per_turn", True),
        ):
            value = getattr(self, name)
            if optional and not value:
                continue  # None (or 0): no cap
            if not isinstance(value, int) or value < 1:
                raise UserError(f"{name} must be an integer >= 1, got {value!r}")
        if not isinstance(self.budget, Budget):
            raise UserError(f"budget must be an rlmkit.Budget, got {type(self.budget).__name__}")

    def replace(self, **changes: Any) -> RunSettings:
        return dataclasses.replace(self, **changes)

    def for_child(self) -> RunSettings:
        """A child run's settings: the same knobs, its own protocol object (a protocol is mutable)."""
        return self.replace(protocol=dataclasses.replace(self.protocol))

    def record(self) -> dict[str, object]:
        """The numeric knobs, as ``RunMeta.limits`` records them next to the budget's limits."""
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if getattr(self, f.name) is None or type(getattr(self, f.name)) in (int, float)
        }

    def sandbox_limits(self, spending: Spending) -> SandboxLimits:
        """The sandbox's limits for a run: a cell may not outlive the run's wall-clock budget."""
        timeout = self.cell_timeout
        remaining = spending.remaining_seconds()
        if remaining is not None:
            timeout = remaining if timeout is None else min(timeout, remaining)
        return dataclasses.replace(self.limits, cell_timeout=timeout)

    # -- saved with a program ------------------------------------------------------------
    def to_state(self) -> dict[str, Any]:
        """Plain JSON data; ``from_state`` reads it back (and older saves, field by field)."""
        state: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Protocol):
                state[f.name], state["finish_prompt"] = value.name, value.finish_prompt
            elif dataclasses.is_dataclass(value) and not isinstance(
                value, type
            ):  # the sandbox's limits, the budget's (never a spending)
                state[f.name] = dataclasses.asdict(value)
            else:
                state[f.name] = value
        return state

    def from_state(self, state: dict[str, Any]) -> RunSettings:
        """These settings with every knob ``state`` holds read back; knobs it lacks keep their value."""
        changes: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name not in state:
                continue
            value, current = state[f.name], getattr(self, f.name)
            if isinstance(current, Protocol):
                value = get_protocol(value)
                value.finish_prompt = state.get("finish_prompt", value.finish_prompt)
            elif dataclasses.is_dataclass(current) and not isinstance(current, type):
                value = type(current)(**value)
            changes[f.name] = value
        return self.replace(**changes)


KNOBS = tuple(f.name for f in dataclasses.fields(RunSettings))

__all__ = ["KNOBS", "RunSettings"]

"""What a run is, as data: the ``Tree`` a call tree shares, the frozen ``RunSpec`` of one run,
and the ``RunState`` that run fills in.

The loop (``run.py``) and the sub-calls (``subcalls.py``) read these and never the ``RLM``:
a child run is started through ``RunSpec.start_child``, so imports point one way
(``rlm -> run -> subcalls -> run_state``).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rlmkit.budget import Spending
from rlmkit.guards import check_values
from rlmkit.settings import RunSettings
from rlmkit.signature import OutputValidator
from rlmkit.trajectory import CodeBlock, RunMeta, SubCall, Trajectory, TrajectoryLog


@dataclass
class Tree:
    """What a whole call tree shares: the loop, its Spending, the fan-out semaphore (how many batched
    sub-call items run at once), the clock and the log."""

    loop: asyncio.AbstractEventLoop
    spending: Spending  # of the root's Budget: children charge the same counters
    semaphore: asyncio.Semaphore
    log: TrajectoryLog | None = None
    t0: float = field(default_factory=time.monotonic)
    rollout_id: int | None = None  # every LM call of the tree is this sample (distinct cache entries)

    def elapsed(self) -> float:
        return time.monotonic() - self.t0


# start_child(inputs, tree=, depth=, parent_id=) -> (outputs, trajectory): one rlm_query's child run
StartChild = Callable[..., Awaitable[tuple[dict[str, Any], Trajectory]]]


@dataclass(frozen=True)
class RunSpec:
    """Everything one run reads, fixed before it starts (``RLM.run_tree`` builds it)."""

    signature: Any  # the dspy.Signature class
    instructions: str
    demos: tuple[Any, ...]
    settings: RunSettings
    validator: OutputValidator
    typed_subcalls: Mapping[str, Any]  # name -> subcalls.TypedSubcall
    tools: Mapping[str, Callable[..., Any]]
    lm: Any  # resolved once per run: one cache and one limiter per model
    sub_lm: Any
    start_child: StartChild
    module: Any = None  # the RLM (a dspy.Module) this run is: what DSPy callbacks are shown
    # limits -> Sandbox, in place of settings.sandbox's backend (a DSPy interpreter, say)
    make_sandbox: Callable[..., Any] | None = None


class RunState:
    """One run in progress: its trajectory, and the code block sub-calls are recorded into."""

    def __init__(self, spec: RunSpec, tree: Tree, depth: int, meta: RunMeta):
        self.spec = spec
        self.tree = tree
        self.depth = depth
        self.trajectory = Trajectory(meta=meta)
        self.submitted: dict[str, Any] | None = None
        self.current_block: CodeBlock | None = None
        self.sandbox_ready: asyncio.Future | None = None  # set by run_loop: the worker's start
        # fills in the sha256 of big inputs (``describe_inputs``); run_loop runs it in a thread
        self.hash_inputs: Callable[[], None] | None = None
        self.start_logged: asyncio.Future | None = None  # set by run_loop: hashed, start record written
        self.sandbox_lease: Any = None  # a session's live REPL (run.FreshSandbox's methods); None: a new one
        self.task_notes = ""  # before the task message's inputs (a session: its history, variables, restores)
        self.call_inputs: tuple[str, ...] = ()  # a session call's own inputs: listed last
        self._lock = threading.Lock()

    def record_subcall(self, node: SubCall) -> None:
        with self._lock:
            if self.current_block is not None:
                self.current_block.subcalls.append(node)
            self.trajectory.usage = self.trajectory.usage.add(node.usage)

    def submit(self, outputs: dict[str, Any]) -> None:
        """Validate outputs (ValueError goes back to the model) and keep them."""
        check_values(outputs)
        self.submitted = self.spec.validator.validate(outputs)

"""One run in progress: its spec, its place in the call tree, the hooks its caller chose, and what
it has done so far (its trajectory, the answer it submitted, the code block running now)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from rlmkit.models.contract import Model
from rlmkit.run.call_tree import Tree
from rlmkit.run.guards import check_values
from rlmkit.run.hooks import CallHooks
from rlmkit.run.spec import RunSpec
from rlmkit.trajectory import CodeBlock, RunMeta, SubCall, Trajectory


class RunState:
    """One run in progress. Everything it is given comes in at construction (``start.run_tree``);
    the loop fills in the rest as the run goes."""

    def __init__(
        self,
        spec: RunSpec[Model],
        tree: Tree,
        meta: RunMeta,
        hooks: CallHooks,
        hash_inputs: Callable[[], None] | None = None,
    ):
        self.spec = spec
        self.tree = tree
        self.depth = spec.depth
        self.hooks = hooks  # its REPL's lease and what its caller adds
        # fills in the sha256 of big inputs (``describe_inputs``); the loop runs it in a thread
        self.hash_inputs = hash_inputs
        self.trajectory = Trajectory(meta=meta)
        self.submitted: dict[str, Any] | None = None
        self.current_block: CodeBlock | None = None
        # the loop's own: the worker's start, and the start record (written once the inputs are hashed)
        self.sandbox_ready: asyncio.Future[None] | None = None
        self.start_logged: asyncio.Future[None] | None = None
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


__all__ = ["RunState"]

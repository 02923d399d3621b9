"""What a whole call tree shares: a top-level call and every ``rlm_query`` child run under it."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rlmkit.budget import Spending
from rlmkit.trajectory import TrajectoryLog

if TYPE_CHECKING:
    from rlmkit.run.client_tools import RunControl
    from rlmkit.run.mcp_tools import McpTool


@dataclass
class Tree:
    """What a whole call tree shares: the loop, its Spending, the fan-out semaphore (how many batched
    sub-call items run at once), the clock, the log, the tools of its MCP servers, and the caller's
    hold on it (its client tools, the request to stop)."""

    loop: asyncio.AbstractEventLoop
    spending: Spending  # of the root's Budget: children charge the same counters
    semaphore: asyncio.Semaphore
    log: TrajectoryLog | None = None
    t0: float = field(default_factory=time.monotonic)
    rollout_id: int | None = None  # every LM call of the tree is this sample (distinct cache entries)
    mcp_tools: dict[str, McpTool] = field(default_factory=dict)  # connected by the top-level call
    control: RunControl | None = None  # the top-level caller's: client tools, stop between turns

    def elapsed(self) -> float:
        return time.monotonic() - self.t0


__all__ = ["Tree"]

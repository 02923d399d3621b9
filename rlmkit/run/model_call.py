"""The budgeted model call: every model request of a run, root turn or sub-call, goes through
``call_model``.

The call is counted when it starts (a burst of concurrent sub-calls cannot overrun
``max_calls``), its output is capped (the smaller of the run's cap and the model's own), and the
run's ``max_seconds`` cancels it in flight.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from rlmkit.budget import Spending
from rlmkit.models.contract import Completion, Model
from rlmkit.trajectory import ChatMessage


def effective_cap(lm: Model, cap: int | None) -> int | None:
    """The smaller of the RLM's cap and one set on the LM itself (a caller's tighter limit wins)."""
    caps = [c for c in (lm.traits.max_tokens, cap) if c]
    return min(caps) if caps else None


async def call_model(
    spending: Spending,
    lm: Model,
    messages: list[ChatMessage],
    *,
    max_tokens: int | None,
    stop: list[str] | None = None,
    record: Callable[[Completion], None] | None = None,
    rollout_id: int | None = None,
) -> Completion:
    """One completion, counted against ``spending``, capped and bounded by the run's deadline.
    ``record(completion)`` runs before its tokens are charged, so a call that passes a limit is
    still in the trajectory."""
    spending.reserve()

    async def call() -> Completion:  # gated once, by the LM's own limit (the tree caps batched fan-out)
        return await lm.acomplete(
            messages,
            rollout_id=rollout_id,
            max_tokens=effective_cap(lm, max_tokens),
            stop=[*lm.traits.stop, *(stop or [])] or None,
        )

    remaining = spending.remaining_seconds()
    try:
        completion = await asyncio.wait_for(call(), timeout=remaining)
    except TimeoutError:
        if remaining is None:  # the model's own timeout, not the run's deadline
            raise
        raise spending.past_deadline() from None
    if record is not None:
        record(completion)
    spending.charge(calls=0, tokens=completion.usage.total_tokens, cost=completion.usage.cost)
    return completion


__all__ = ["call_model", "effective_cap"]

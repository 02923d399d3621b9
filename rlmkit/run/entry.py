"""How a caller's call enters a run, written once for ``RLM`` and ``Session``: the options every
call takes beside its inputs (``CallOptions``), and the one bridge from sync code (``call_sync``)."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from rlmkit.concurrency.sync_loop import run_sync
from rlmkit.models.lm_cache import current_rollout_id
from rlmkit.observe.streaming import remember_caller_loop

T = TypeVar("T")


@dataclass(frozen=True)
class CallOptions:
    """What a call takes beside its inputs: ``_task`` (stored in ``trajectory.meta.task``:
    evaluation keeps suite, example id and gold there) and ``_rollout_id`` (every LM call of the
    run is that sample; default: the enclosing ``rlmkit.models.lm_cache.rollout(k)``)."""

    task: dict[str, Any] | None = None
    rollout_id: int | None = None

    @classmethod
    def pop(cls, inputs: dict[str, Any]) -> CallOptions:
        """Take the options out of ``inputs``, leaving the signature's inputs."""
        task = inputs.pop("_task", None)
        rollout_id = inputs.pop("_rollout_id", None)
        return cls(task, current_rollout_id.get() if rollout_id is None else rollout_id)


def call_sync(acall: Callable[..., Coroutine[Any, Any, T]], /, *args: Any, **inputs: Any) -> T:
    """``acall(*args, **inputs)`` from sync code, on the one long-lived loop sync calls share
    (``run_sync``: Ctrl-C cancels this call alone). That loop's thread cannot see the caller's
    context, so the rollout id and, under ``dspy.streamify``, the caller's event loop go with it."""
    inputs.setdefault("_rollout_id", current_rollout_id.get())
    with remember_caller_loop():
        return run_sync(acall(*args, **inputs))


__all__ = ["CallOptions", "call_sync"]

"""What a call tree may spend (``Budget``, frozen limits) apart from what it has spent
(``Spending``, the counters of one tree).

A user gives an RLM (or a session) a ``Budget``; each call tree (root, sub-calls, child RLMs)
gets one ``Spending`` against it. A child never gets a Spending of its own: it charges the
root's, so it can never spend what the root does not have. A session holds a ``Spending`` of its
own budget, and each of its calls' trees charges it too (``within``): a call stops at whichever
limit comes first, its RLM's or what the session has left. ``Spending`` is thread-safe, because
sub-calls are charged from the sandbox's callback threads and from the event loop alike.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from rlmkit.errors import BudgetExceeded

# The LM-call cap of an RLM built without ``budget=``. dspy.RLM's 50 is too few for real RLM
# work: 20 root turns plus fanning out over ~100 chunks of a large input a few times fits in
# 500, while a runaway cell (``llm_query_batched(['hi'] * 5000)``) stops at 500 calls.
DEFAULT_MAX_CALLS = 500


@dataclass(frozen=True)
class Budget:
    """Limits for a call tree: LM calls, tokens, dollars, wall seconds. ``None`` means unlimited.
    Frozen: a program's budget is what it may spend, never what one of its calls spent."""

    max_calls: int | None = None
    max_tokens: int | None = None
    max_cost: float | None = None
    max_seconds: float | None = None

    def __post_init__(self) -> None:
        for name in ("max_calls", "max_tokens", "max_cost", "max_seconds"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"Budget.{name} must be positive or None, got {value!r}")

    def limits(self) -> dict[str, float | None]:
        return {
            "max_calls": self.max_calls,
            "max_tokens": self.max_tokens,
            "max_cost": self.max_cost,
            "max_seconds": self.max_seconds,
        }

    def spending(self, *, within: Spending | None = None) -> Spending:
        """Fresh counters for one call tree against these limits, its clock started now; every
        charge also goes to ``within`` (a session's counters), when given."""
        return Spending(self, within=within).start()


@dataclass
class Spending:
    """What one call tree (or one session) has spent of its ``Budget``: counted at each call,
    checked against it, and passed on to the Spending it is ``within``, if any."""

    budget: Budget
    within: Spending | None = None  # an outer Spending every charge also goes to (a session's)
    name: str = "budget"  # what its errors call it ("session budget")
    calls: int = field(default=0, init=False)
    tokens: int = field(default=0, init=False)
    cost: float = field(default=0.0, init=False)
    started_at: float | None = field(default=None, init=False)
    seconds_before: float = field(default=0.0, init=False)  # counted before the clock's last start
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

    # -- lifecycle -------------------------------------------------------------
    def start(self) -> Spending:
        """Start the wall clock (idempotent: the first start of a tree wins)."""
        with self._lock:
            if self.started_at is None:
                self.started_at = time.monotonic()
        return self

    def stop(self) -> None:
        """Stop the clock, keeping the seconds counted so far: a session's clock runs only
        while one of its calls does, so its ``max_seconds`` is time spent in calls."""
        with self._lock:
            if self.started_at is not None:
                self.seconds_before += time.monotonic() - self.started_at
                self.started_at = None

    def resume(self, used: Mapping[str, float]) -> Spending:
        """Carry on from counters saved earlier (``used()``'s keys): a session loaded from disk."""
        with self._lock:
            self.calls = int(used.get("calls", 0))
            self.tokens = int(used.get("tokens", 0))
            self.cost = float(used.get("cost", 0.0))
            self.seconds_before = float(used.get("seconds", 0.0))
        return self

    @property
    def elapsed(self) -> float:
        running = 0.0 if self.started_at is None else time.monotonic() - self.started_at
        return self.seconds_before + running

    def used(self) -> dict[str, float]:
        return {"calls": self.calls, "tokens": self.tokens, "cost": self.cost, "seconds": self.elapsed}

    def remaining_seconds(self) -> float | None:
        """Seconds left before the nearer deadline, this one's or the outer Spending's."""
        own, outer = self._own_seconds_left(), self._outer_seconds_left()
        return own if outer is None else outer if own is None else min(own, outer)

    def _own_seconds_left(self) -> float | None:
        limit = self.budget.max_seconds
        return None if limit is None else max(0.0, limit - self.elapsed)

    def _outer_seconds_left(self) -> float | None:
        return None if self.within is None else self.within.remaining_seconds()

    # -- checks ----------------------------------------------------------------
    def check(self) -> None:
        """Raise BudgetExceeded if any limit is already spent (an outer Spending's included)."""
        with self._lock:
            self._check_locked(next_call=True)
        if self.within is not None:
            self.within.check()

    def reserve(self) -> None:
        """Count one LM call as it starts, or raise if no call is left. Counting at the start,
        under the lock, is what stops a burst of 5,000 concurrent sub-calls at ``max_calls``.
        Locks are taken inner first, then the outer one, always in that order."""
        with self._lock:
            self._check_locked(next_call=True)
            if self.within is not None:
                self.within.reserve()
            self.calls += 1

    def past_deadline(self) -> BudgetExceeded:
        """The error for a call cancelled at the nearer ``max_seconds``."""
        own, outer = self._own_seconds_left(), self._outer_seconds_left()
        if self.within is not None and outer is not None and (own is None or outer <= own):
            return self.within.past_deadline()
        assert self.budget.max_seconds is not None, "past a deadline that was never set"
        return BudgetExceeded(
            f"{self.name} exceeded: seconds used {round(self.elapsed, 3)} of {self.budget.max_seconds}",
            kind="seconds",
            limit=self.budget.max_seconds,
            used=round(self.elapsed, 3),
        )

    def charge(self, *, calls: int = 1, tokens: int = 0, cost: float = 0.0) -> None:
        """Record spending after a call, here and in the outer Spending. Raises once a limit is
        passed (the call itself is kept)."""
        with self._lock:
            self.calls += calls
            self.tokens += tokens
            self.cost += cost or 0.0
            if self.within is not None:
                self.within.charge(calls=calls, tokens=tokens, cost=cost)
            self._check_locked(next_call=False)

    def _check_locked(self, *, next_call: bool) -> None:
        limit = self.budget
        over: list[tuple[str, float, float]] = []
        if limit.max_calls is not None and (
            self.calls >= limit.max_calls if next_call else self.calls > limit.max_calls
        ):
            over.append(("calls", limit.max_calls, self.calls))
        if limit.max_tokens is not None and self.tokens > limit.max_tokens:
            over.append(("tokens", limit.max_tokens, self.tokens))
        if limit.max_cost is not None and self.cost > limit.max_cost:
            over.append(("cost", limit.max_cost, self.cost))
        if limit.max_seconds is not None and self.elapsed > limit.max_seconds:
            over.append(("seconds", limit.max_seconds, round(self.elapsed, 3)))
        if over:
            kind, cap, used = over[0]
            hint = (
                " (raise it with budget=rlmkit.Budget(max_calls=N), or max_calls=None for no cap)"
                if kind == "calls"
                else ""
            )
            raise BudgetExceeded(
                f"{self.name} exceeded: {kind} used {used} of {cap}{hint}", kind=kind, limit=cap, used=used
            )

"""``Budget`` (frozen limits) and ``Spending`` (one tree's counters): a call tree charges its own
Spending and, for a session's call, the session's too, stopping at whichever limit comes first."""

from __future__ import annotations

import time

import pytest

from rlmkit.budget import Budget, Spending
from rlmkit.errors import BudgetExceeded


def test_a_tree_within_a_session_charges_both_and_stops_at_the_session_limit():
    session = Spending(Budget(max_calls=3), name="session budget")
    first = Budget(max_calls=10).spending(within=session)
    first.reserve()
    first.charge(calls=0, tokens=5)
    second = Budget(max_calls=10).spending(within=session)
    second.reserve()
    second.reserve()
    assert (first.calls, second.calls, session.calls, session.tokens) == (1, 2, 3, 5)
    with pytest.raises(BudgetExceeded, match="session budget exceeded: calls used 3 of 3"):
        second.reserve()
    assert (second.calls, session.calls) == (2, 3)  # a refused call is counted nowhere


def test_the_tree_s_own_limit_stops_it_before_the_session_s():
    session = Spending(Budget(max_calls=10), name="session budget")
    tree = Budget(max_calls=1).spending(within=session)
    tree.reserve()
    with pytest.raises(BudgetExceeded, match="^budget exceeded: calls"):
        tree.reserve()
    assert session.calls == 1


def test_a_session_s_clock_counts_only_time_in_calls_and_bounds_each_call():
    session = Spending(Budget(max_seconds=100.0), name="session budget")
    assert session.elapsed == 0.0
    session.start()
    time.sleep(0.02)
    session.stop()
    spent = session.elapsed
    time.sleep(0.02)
    assert spent >= 0.02 and session.elapsed == spent  # stopped between calls
    tree = Budget(max_seconds=1000.0).spending(within=session)
    assert tree.remaining_seconds() == pytest.approx(100.0 - spent, abs=0.01)  # the nearer deadline
    assert tree.past_deadline().args[0].startswith("session budget exceeded: seconds")


def test_saved_counters_carry_on():
    session = Spending(Budget(max_tokens=100), name="session budget")
    session.resume({"calls": 2, "tokens": 99, "cost": 0.5, "seconds": 3.0})
    assert session.used() == {"calls": 2, "tokens": 99, "cost": 0.5, "seconds": 3.0}
    with pytest.raises(BudgetExceeded, match="tokens used 101 of 100"):
        Budget().spending(within=session).charge(calls=0, tokens=2)

"""MCP servers' tools as REPL functions: a real MCP server (tests/helpers/mcp_server.py, over stdio)
answers the calls of a scripted root model's code."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import rlmkit
from rlmkit.errors import BudgetExceeded, ConfigError, McpServerError
from tests.helpers.replies import repl

SERVER = [sys.executable, str(Path(__file__).resolve().parents[1] / "helpers" / "mcp_server.py")]

CALLS = """
host = lookup_host(name="web-1")
n = count_words("a bb ccc dddd", minimum=2)
try:
    lookup_host(name=5)
except ValueError as exc:
    bad = str(exc)
try:
    fail(reason="disk full")
except RuntimeError as exc:
    failed = str(exc)
SUBMIT(answer=repr((host, n, bad, failed)))
"""


class Root:
    """Runs ``code`` at its first turn and keeps what it was told."""

    def __init__(self, code: str):
        self.code = code
        self.system: list[str] = []

    def __call__(self, messages: list[dict]) -> str:
        self.system.append(messages[0]["content"])
        return repl(self.code)


def test_tools_are_repl_functions_checked_recorded_and_described():
    root = Root(CALLS)
    rlm = rlmkit.RLM("question -> answer", lm=rlmkit.FunctionLM(root), mcp_servers=[SERVER])
    pred = rlm(question="Where is web-1?")

    host, n, bad, failed = ast.literal_eval(pred.answer)
    assert host == {"name": "web-1", "ip": "10.0.0.1", "role": "web"} and n == 3
    assert "lookup_host()" in bad and "input schema" in bad and "name: 5 is not of type 'string'" in bad
    assert "MCP tool fail failed" in failed and "disk full" in failed

    calls = [c for t in pred.trajectory.turns for b in t.blocks for c in b.subcalls]
    assert [(c.kind, c.name) for c in calls] == [
        ("mcp_tool", "lookup_host"),
        ("mcp_tool", "count_words"),
        ("mcp_tool", "lookup_host"),
        ("mcp_tool", "fail"),
    ]
    assert calls[0].prompt == '{"name": "web-1"}' and '"ip": "10.0.0.1"' in calls[0].reply
    assert calls[1].prompt == '{"text": "a bb ccc dddd", "minimum": 2}' and calls[1].reply == "3"
    assert calls[2].error.startswith("ValueError") and calls[3].error.startswith("RuntimeError")
    assert all("mcp_server.py" in c.model for c in calls)  # the server that answered

    system = root.system[0]
    assert "lookup_host(name: string): Look up a host of the inventory by name." in system
    assert "count_words(text: string, minimum: integer = ...)" in system and "MCP tool of" in system


def test_each_tool_call_is_counted_by_the_budget():
    code = "for i in range(5):\n    shout('x')\nSUBMIT(answer='done')"
    rlm = rlmkit.RLM(
        "question -> answer",
        lm=rlmkit.FunctionLM(Root(code)),
        mcp_servers=[SERVER],
        budget=rlmkit.Budget(max_calls=3),  # the root's first turn, then two tool calls
    )
    with pytest.raises(BudgetExceeded) as caught:
        rlm(question="q")
    assert caught.value.kind == "calls"
    calls = [c for t in caught.value.trajectory.turns for b in t.blocks for c in b.subcalls]
    assert [c.error is None for c in calls] == [True, True, False] and calls[-1].error.startswith(
        "BudgetExceeded"
    )


def test_a_session_counts_tool_calls_in_its_spending():
    rlm = rlmkit.RLM(
        "question -> answer",
        lm=rlmkit.FunctionLM(Root("SUBMIT(answer=shout('hi') + str(count_words(text='a b')))")),
        mcp_servers=[SERVER],
    )
    with rlm.session() as s:
        assert s(question="one").answer == "HI2"
        assert s(question="two").answer == "HI2"
        assert s.spent["calls"] == 2 * (1 + 2)  # per call: one root turn, two tool calls


def test_servers_are_checked_at_construction_and_a_dead_one_fails_the_call():
    with pytest.raises(ConfigError, match="http"):
        rlmkit.RLM("question -> answer", mcp_servers=["localhost:8000/mcp"])
    with pytest.raises(ConfigError, match="list of servers"):
        rlmkit.RLM("question -> answer", mcp_servers="http://127.0.0.1:9/mcp")
    rlm = rlmkit.RLM("question -> answer", lm=rlmkit.FunctionLM(Root("SUBMIT(answer='x')")),
                     mcp_servers=[[sys.executable, "-c", "import sys; sys.exit(3)"]])  # fmt: skip
    with pytest.raises(McpServerError, match="could not be reached") as caught:
        rlm(question="q")
    assert caught.value.trajectory.status == "error"


def test_a_tool_may_not_take_a_name_the_repl_already_has():
    rlm = rlmkit.RLM("question, shout -> answer", lm=rlmkit.FunctionLM(Root("SUBMIT(answer='x')")),
                     mcp_servers=[SERVER])  # fmt: skip
    with pytest.raises(ConfigError, match="'shout'.*cannot be a REPL function"):
        rlm(question="q", shout="an input")

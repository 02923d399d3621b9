"""``rlmkit mcp`` speaks MCP's 2026-07-28 revision to the ``mcp`` SDK's ``Client``, over stdio and
over Streamable HTTP (``--http``): discovery without a handshake, a REPL kept behind a
server-minted handle, a long run as a Task polled to its result, and a Task stopped between
turns with what its finished turns made kept."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, Result
from mcp.types.jsonrpc import INVALID_PARAMS, MISSING_REQUIRED_CLIENT_CAPABILITY

from rlmkit.serve.mcp.tasks import TASKS_EXTENSION, TURNS_META_KEY, CreateTaskResult
from tests.helpers.mcp_programs import (
    TasksClient,
    cancel_task,
    get_task,
    http_server,
    mcp_command,
    mcp_env,
    stdio_server,
    until_done,
    until_file,
)
from tests.helpers.serve_programs import ROOT

TURNS = "tests.helpers.mcp_programs:turns"
QA = "tests.helpers.serve_programs:qa"
Target = StdioServerParameters | str  # what mcp.Client connects to: a command, or a URL
T = TypeVar("T")


@pytest.fixture(params=["stdio", "http"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Target, Path]]:
    """The ``turns`` program served over each transport, and the gate file its slow turn waits for."""
    gate = tmp_path / "gate"
    if request.param == "stdio":
        yield stdio_server(TURNS, gate), gate
        return
    with http_server(TURNS, gate=gate) as url:
        yield url, gate


def text(result: CallToolResult) -> str:
    return "".join(part.text for part in result.content if part.type == "text")


def run(main: Callable[[], Awaitable[T]]) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(main(), 120)

    return asyncio.run(bounded())


def as_task(result: CallToolResult | Result) -> CreateTaskResult:
    assert isinstance(result, CreateTaskResult), result
    return result


def as_result(result: CallToolResult | Result) -> CallToolResult:
    assert isinstance(result, CallToolResult), result
    return result


def test_the_client_discovers_the_revision_and_calls_the_tool_without_a_handshake(
    server: tuple[Target, Path],
) -> None:
    target, _ = server

    async def main() -> None:
        async with Client(target) as client:  # auto: server/discover, never initialize
            assert client.protocol_version == "2026-07-28"
            assert TASKS_EXTENSION in (client.server_capabilities.extensions or {})
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert {"ask_rlm", "ask_rlm_open", "ask_rlm_ask", "ask_rlm_close"} == set(tools)
            hints = tools["ask_rlm"].annotations, tools["ask_rlm_close"].annotations
            assert hints[0] is not None and hints[0].read_only_hint
            assert hints[1] is not None and hints[1].destructive_hint
            # a client that does not declare the Tasks extension waits for the answer itself
            answer = await client.call_tool("ask_rlm", {"question": "plain", "context": "abcd"})
            assert not answer.is_error and text(answer) == "plain: call 1, context 4 chars, kept nothing"
            assert answer.structured_content == {"result": text(answer)}
            # and may not poll tasks: the extension's methods ask for it
            with pytest.raises(MCPError) as undeclared:
                await get_task(client.session, "any")
            assert undeclared.value.error.code == MISSING_REQUIRED_CLIENT_CAPABILITY

    run(main)


def test_a_handle_keeps_the_repl_and_tasks_are_polled_and_stopped_between_turns(
    server: tuple[Target, Path],
) -> None:
    target, gate = server

    async def main() -> None:
        async with Client(target, extensions=[TasksClient()]) as client:
            session = client.session
            opened = await client.call_tool("ask_rlm_open", {"context": "0123456789"})
            handle = json.loads(text(opened))["handle"]

            # a task, polled by hand to its result
            ask = {"handle": handle, "question": "first"}
            created = as_task(await session.call_tool("ask_rlm_ask", ask, allow_claimed=True))
            assert created.result_type == "task" and len(created.task_id) >= 32
            first = await until_done(session, created.task_id)
            assert first.status == "completed" and first.result is not None
            assert not first.result["isError"]
            assert first.result["content"][0]["text"] == "first: call 1, context 10 chars, kept nothing"

            # the SDK's Client polls a task itself (the extension's claim on the "task" shape)
            second = await client.call_tool("ask_rlm_ask", {"handle": handle, "question": "second"})
            assert text(second) == "second: call 2, context 10 chars, kept nothing"

            # a slow call, stopped while its second turn is in flight
            ask = {"handle": handle, "question": "slow"}
            slow = as_task(await session.call_tool("ask_rlm_ask", ask, allow_claimed=True))
            assert slow.status == "working"  # answered at once: the run goes on
            await until_file(gate.with_name(gate.name + ".waiting"))
            await cancel_task(session, slow.task_id)
            stopping = await get_task(session, slow.task_id)
            assert stopping.status == "working"
            assert "stopping after the turn in flight" in (stopping.status_message or "")
            gate.write_text("go")  # the turn in flight finishes; the next one must never begin
            stopped = await until_done(session, slow.task_id)
            assert stopped.status == "cancelled" and stopped.result is None
            assert "2 turn(s) finished" in (stopped.status_message or "")
            finished = (stopped.meta or {})[TURNS_META_KEY]
            assert len(finished) == 2 and "second two" in finished[1]

            # the third turn never ran (it would have answered "ran past the stop"); what the two
            # finished turns made is still in the handle's REPL
            after = await client.call_tool("ask_rlm_ask", {"handle": handle, "question": "after"})
            assert text(after) == "after: call 4, context 10 chars, kept one/two"

            with pytest.raises(MCPError) as unknown:
                await get_task(session, "no-such-task")
            assert unknown.value.error.code == INVALID_PARAMS

    run(main)


def test_bad_arguments_are_an_error_at_once_not_a_task(server: tuple[Target, Path]) -> None:
    target, _ = server

    async def main() -> None:
        async with Client(target, extensions=[TasksClient()]) as client:
            session = client.session
            missing = as_result(await session.call_tool("ask_rlm", {"question": "q"}, allow_claimed=True))
            assert (
                missing.is_error and "MissingInputError" in text(missing) and "context_path" in text(missing)
            )
            ask: dict[str, Any] = {"handle": "f" * 32, "question": "q"}
            unknown = as_result(await session.call_tool("ask_rlm_ask", ask, allow_claimed=True))
            assert unknown.is_error and "no session" in text(unknown)

    run(main)


def test_beyond_loopback_http_needs_a_key_before_anything_loads() -> None:
    refused = subprocess.run(
        mcp_command(QA, "--http", "--host", "0.0.0.0"),
        env=mcp_env(),
        cwd=str(ROOT),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode != 0 and "--api-key" in refused.stderr


def test_with_a_key_only_clients_holding_it_are_served() -> None:
    key = "sk-test-key"
    with http_server(QA, "--api-key", key) as url:

        async def main() -> list[str]:
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}) as http:
                async with Client(streamable_http_client(url, http_client=http)) as client:
                    return [tool.name for tool in (await client.list_tools()).tools]

        tools = run(main)
        discover = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}}
        refused = [
            httpx2.post(url, json=discover, headers=headers)
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": key})
        ]
    assert "ask_rlm" in tools
    assert [r.status_code for r in refused] == [401, 401, 401]
    assert all(key not in r.text for r in refused)


def test_a_handshake_era_client_is_still_served_over_http() -> None:
    with http_server(QA) as url:

        async def main() -> None:
            async with Client(url, mode="legacy") as client:  # initialize first, as before 2026-07-28
                assert client.protocol_version == "2025-11-25"
                answer = await client.call_tool("ask_rlm", {"question": "old", "context": "abc"})
                assert text(answer) == "OLD (3 chars)"
                opened = await client.call_tool("ask_rlm_open", {"context": "abcd"})
                assert json.loads(text(opened))["holds"] == ["context"]

        run(main)

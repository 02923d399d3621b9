"""``rlmkit mcp`` speaks MCP's 2026-07-28 revision to the ``mcp`` SDK's ``Client``, over stdio and
over Streamable HTTP (``--http``): discovery without a handshake, a REPL kept behind a
server-minted handle, a long run as a Task polled to its result, and a Task stopped between
turns with what its finished turns made kept."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types.jsonrpc import INVALID_PARAMS

from rlmkit.serve.mcp.tasks import TASKS_EXTENSION, TURNS_META_KEY
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


@pytest.fixture(params=["stdio", "http"])
def server(request, tmp_path) -> Iterator[tuple[object, Path]]:
    """What ``mcp.Client`` connects to (a command for stdio, a URL for HTTP), and the gate file
    the ``turns`` program's slow turn waits for."""
    gate = tmp_path / "gate"
    if request.param == "stdio":
        yield stdio_server(TURNS, gate), gate
        return
    with http_server(TURNS, gate=gate) as url:
        yield url, gate


def text(result) -> str:
    return "".join(part.text for part in result.content if part.type == "text")


def run(main) -> object:
    return asyncio.run(asyncio.wait_for(main(), 120))


def test_the_client_discovers_the_revision_and_calls_the_tool_without_a_handshake(server):
    target, _ = server

    async def main():
        async with Client(target) as client:  # auto: server/discover, never initialize
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            answer = await client.call_tool("ask_rlm", {"question": "plain", "context": "abcd"})
            return client.protocol_version, client.server_capabilities, tools, answer

    version, capabilities, tools, answer = run(main)
    assert version == "2026-07-28"
    assert TASKS_EXTENSION in (capabilities.extensions or {})
    assert {"ask_rlm", "ask_rlm_open", "ask_rlm_ask", "ask_rlm_close"} == set(tools)
    assert tools["ask_rlm"].annotations.read_only_hint and tools["ask_rlm_close"].annotations.destructive_hint
    # a client that does not declare the Tasks extension waits for the answer itself
    assert not answer.is_error and text(answer) == "plain: call 1, context 4 chars, kept nothing"
    assert answer.structured_content == {"result": text(answer)}


def test_a_handle_keeps_the_repl_and_tasks_are_polled_and_stopped_between_turns(server):
    target, gate = server

    async def main():
        async with Client(target, extensions=[TasksClient()]) as client:
            session = client.session
            opened = await client.call_tool("ask_rlm_open", {"context": "0123456789"})
            handle = json.loads(text(opened))["handle"]
            # a task, polled by hand to its result
            created = await session.call_tool(
                "ask_rlm_ask", {"handle": handle, "question": "first"}, allow_claimed=True
            )
            first = await until_done(session, created.task_id)
            # the SDK's Client polls a task itself (the extension's claim on the "task" shape)
            second = await client.call_tool("ask_rlm_ask", {"handle": handle, "question": "second"})
            # a slow call: stopped while its second turn is in flight
            slow = await session.call_tool(
                "ask_rlm_ask", {"handle": handle, "question": "slow"}, allow_claimed=True
            )
            await until_file(gate.with_name(gate.name + ".waiting"))
            await cancel_task(session, slow.task_id)
            stopping = await get_task(session, slow.task_id)
            gate.write_text("go")  # the turn in flight finishes; the next one must never begin
            stopped = await until_done(session, slow.task_id)
            after = await client.call_tool("ask_rlm_ask", {"handle": handle, "question": "after"})
            with pytest.raises(MCPError) as unknown:
                await get_task(session, "no-such-task")
            return created, first, second, slow, stopping, stopped, after, unknown.value

    created, first, second, slow, stopping, stopped, after, unknown = run(main)
    assert created.result_type == "task" and created.status == "working" and len(created.task_id) >= 32
    assert first.status == "completed" and first.result["isError"] is False
    assert first.result["content"][0]["text"] == "first: call 1, context 10 chars, kept nothing"
    assert text(second) == "second: call 2, context 10 chars, kept nothing"
    assert slow.status == "working"  # answered at once, while the run waits in its second turn
    assert stopping.status == "working" and "stopping after the turn in flight" in stopping.status_message
    assert stopped.status == "cancelled" and "2 turn(s) finished" in stopped.status_message
    assert stopped.result is None and len(stopped.meta[TURNS_META_KEY]) == 2
    assert "second two" in stopped.meta[TURNS_META_KEY][1]
    # the third turn never ran (it would have answered "ran past the stop"); what the two finished
    # turns made is still in the handle's REPL
    assert text(after) == "after: call 4, context 10 chars, kept one/two"
    assert unknown.error.code == INVALID_PARAMS


def test_bad_arguments_are_an_error_at_once_not_a_task(server):
    target, _ = server

    async def main():
        async with Client(target, extensions=[TasksClient()]) as client:
            missing = await client.session.call_tool(
                "ask_rlm", {"question": "no context"}, allow_claimed=True
            )
            no_handle = await client.session.call_tool(
                "ask_rlm_ask", {"handle": "f" * 32, "question": "q"}, allow_claimed=True
            )
            return missing, no_handle

    missing, no_handle = run(main)
    assert missing.is_error and "MissingInputError" in text(missing) and "context_path" in text(missing)
    assert no_handle.is_error and "no session" in text(no_handle)


def test_beyond_loopback_http_needs_a_key_before_anything_loads():
    refused = subprocess.run(
        mcp_command("tests.helpers.serve_programs:qa", "--http", "--host", "0.0.0.0"),
        env=mcp_env(),
        cwd=str(ROOT),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode != 0 and "--api-key" in refused.stderr


def test_with_a_key_only_clients_holding_it_are_served():
    key = "sk-test-key"
    with http_server("tests.helpers.serve_programs:qa", "--api-key", key) as url:

        async def main(headers):
            async with httpx2.AsyncClient(headers=headers) as http:
                async with Client(streamable_http_client(url, http_client=http)) as client:
                    return [tool.name for tool in (await client.list_tools()).tools]

        tools = run(lambda: main({"Authorization": f"Bearer {key}"}))
        discover = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}}
        refused = [
            httpx2.post(url, json=discover, headers=headers)
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": key})
        ]
    assert "ask_rlm" in tools
    assert [r.status_code for r in refused] == [401, 401, 401]
    assert all(key not in r.text for r in refused)

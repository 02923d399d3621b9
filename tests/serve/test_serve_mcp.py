"""``rlmkit mcp``: a handshake-era MCP client session from the ``mcp`` SDK (``initialize`` first),
over stdio, calling the program's tool with the context as a file path, as a folder and as text,
and keeping a REPL behind a handle. The 2026-07-28 revision's clients: ``test_serve_mcp_revision``."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult, LoggingMessageNotificationParams, Tool

from tests.helpers.serve_programs import MCP, ROOT, write_module


def call_tools(
    calls: list[dict[str, Any]],
    logs: list[Any] | None = None,
    program: str = "tests.helpers.serve_programs:qa",
    cwd: Path = ROOT,
) -> tuple[list[Tool], list[tuple[bool, str]]]:
    """The server's tools, and (is_error, text) of each call in ``calls``; the log messages the
    server sent go to ``logs``."""
    params = StdioServerParameters(
        command=MCP[0],
        args=[*MCP[1:], program, "--name", "ask_rlm"],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=str(cwd),
    )

    async def main() -> tuple[list[Tool], list[tuple[bool, str]]]:
        async def logged(params: LoggingMessageNotificationParams) -> None:
            if logs is not None:
                logs.append(params.data)

        async with (
            stdio_client(params) as (read, write),
            ClientSession(read, write, logging_callback=logged) as session,
        ):
            await session.initialize()
            tools = (await session.list_tools()).tools
            texts = []
            for arguments in calls:
                result = await session.call_tool("ask_rlm", arguments)
                text = "".join(part.text for part in result.content if part.type == "text")
                texts.append((bool(result.is_error), text))
            return tools, texts

    return asyncio.run(asyncio.wait_for(main(), 120))


def test_the_tool_takes_the_context_by_path_or_as_text(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_text("x" * 12_345)
    folder = tmp_path / "repo"
    folder.mkdir()
    (folder / "a.py").write_text("print(1)\n")
    (folder / "b.py").write_text("print(2)\n")
    logs: list[Any] = []
    tools, texts = call_tools(
        [
            {"question": "errors?", "context_path": str(log)},
            {"question": "files?", "context_path": str(folder)},
            {"question": "short", "context": "abc"},
        ],
        logs,
    )
    tool = next(tool for tool in tools if tool.name == "ask_rlm")
    assert "Recursive Language Model" in (tool.description or "")
    assert set(tool.input_schema["properties"]) == {"question", "context", "question_path", "context_path"}
    # a folder is {path: text} of its files: len() of it counts the files
    assert texts == [
        (False, "ERRORS? (12345 chars)"),
        (False, "FILES? (2 chars)"),
        (False, "SHORT (3 chars)"),
    ]
    # each call's work went to the agent as it happened: its turn, sub-call and output
    assert sum("[turn 1]" in str(m) for m in logs) == 3 and any(
        "context chars: 12345" in str(m) for m in logs
    )


def test_a_call_without_the_required_text_is_an_error_result_and_the_server_goes_on() -> None:
    _, results = call_tools([{"question": "no context"}, {"question": "then", "context": "ab"}])
    (failed, why), answered = results
    assert failed and "MissingInputError" in why and "context_path" in why
    assert answered == (False, "THEN (2 chars)")


def test_module_attr_is_found_in_the_folder_the_command_runs_from(tmp_path: Path) -> None:
    write_module(tmp_path)
    _, results = call_tools([{"question": "hi", "context": "abc"}], program="mymodule:program", cwd=tmp_path)
    assert results == [(False, "from mymodule: hi")]


def test_a_handle_keeps_the_repl_between_calls(tmp_path: Path) -> None:
    context = tmp_path / "context.txt"
    context.write_text("0123456789")
    params = StdioServerParameters(
        command=MCP[0],
        args=[*MCP[1:], "tests.helpers.serve_programs:counting", "--name", "ask_rlm"],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=str(ROOT),
    )

    def text(result: CallToolResult) -> str:
        return "".join(part.text for part in result.content if part.type == "text")

    async def main() -> tuple[dict[str, Tool], list[CallToolResult]]:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as mcp:
            await mcp.initialize()
            tools = {tool.name: tool for tool in (await mcp.list_tools()).tools}
            opened = await mcp.call_tool("ask_rlm_open", {"context_path": str(context)})
            handle = json.loads(text(opened))["handle"]
            first = await mcp.call_tool("ask_rlm_ask", {"handle": handle, "question": "first"})
            second = await mcp.call_tool("ask_rlm_ask", {"handle": handle, "question": "second"})
            other = json.loads(text(await mcp.call_tool("ask_rlm_open", {"context": "abc"})))["handle"]
            elsewhere = await mcp.call_tool("ask_rlm_ask", {"handle": other, "question": "other"})
            closed = await mcp.call_tool("ask_rlm_close", {"handle": handle})
            after = await mcp.call_tool("ask_rlm_ask", {"handle": handle, "question": "after"})
            return tools, [first, second, elsewhere, closed, after]

    tools, (first, second, elsewhere, closed, after) = asyncio.run(asyncio.wait_for(main(), 120))
    assert {"ask_rlm", "ask_rlm_open", "ask_rlm_ask", "ask_rlm_close"} <= set(tools)
    assert tools["ask_rlm_ask"].input_schema["required"] == ["handle"]
    # the REPL's variable `count` lives on between the calls of one handle, not across handles
    assert text(first) == "first: call 1, context 10 chars"
    assert text(second) == "second: call 2, context 10 chars"
    assert text(elsewhere) == "other: call 1, context 3 chars"
    assert not closed.is_error and json.loads(text(closed))["closed"] is True
    assert after.is_error and "no session" in text(after)

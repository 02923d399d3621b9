"""MCP servers' tools as REPL functions (``RLM(..., mcp_servers=[...])``), through the ``mcp`` SDK.

A server is named by what ``mcp.Client`` connects to: a URL (streamable HTTP), a command as a list
of strings or an ``mcp.StdioServerParameters`` (stdio: the server runs as a child process), or an
``MCPServer`` object (in process). A top-level call connects to each listed server once, before its
first model request (the system prompt describes the tools), and every run of its call tree shares
the connections; they close when the call ends.

Each tool becomes a function of the same name in the REPL. Its arguments (keywords, or positions in
the order of the schema's properties) are checked against the tool's input schema on the host
before anything is sent: a violation is a ``ValueError`` in the REPL that names the tool and what is
wrong. The result is the tool's structured content when it gives one, else its text; a tool that
reports an error raises ``RuntimeError`` in the REPL.

(The other direction, a program served as MCP tools, is ``rlmkit.serve.mcp``.)
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rlmkit.errors import ConfigError, McpServerError, install_hint
from rlmkit.run.tool_schema import check_arguments, signature

CONNECT_TIMEOUT_S = 60.0  # a server that starts (a Python process importing its SDK) and lists its tools


@dataclass(frozen=True)
class McpTool:
    """One tool of one connected server, as the REPL gets it."""

    name: str
    server: str  # the server as the trajectory and errors name it
    description: str
    schema: dict[str, Any]  # its JSON Schema input schema
    connection: McpConnection = field(repr=False, compare=False)

    def arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """The call's arguments as the schema names them, checked against it (``ValueError``)."""
        return check_arguments(self.name, self.schema, args, kwargs)

    def signature(self) -> str:
        return signature(self.name, self.schema)

    def doc(self) -> str:
        text = " ".join(self.description.split()) or "a tool."
        return f"{self.signature()}: {text} (MCP tool of {self.server}; arguments checked against its schema)"

    async def call(self, arguments: dict[str, Any], timeout: float | None) -> Any:
        """The tool's result: structured content when given, else its text (``RuntimeError`` when
        the tool reports an error)."""
        result = await asyncio.wait_for(self.connection.call(self.name, arguments), timeout=timeout)
        text = "\n".join(_content_text(item) for item in result.content)
        if result.is_error:
            raise RuntimeError(f"MCP tool {self.name} failed: {text or 'no message'}")
        structured = result.structured_content
        if isinstance(structured, dict):  # a bare value comes wrapped as {"result": value}
            return structured["result"] if set(structured) == {"result"} else structured
        return text


def _content_text(item: Any) -> str:
    text = getattr(item, "text", None)
    if text is not None:
        return text
    return f"[{getattr(item, 'type', 'content')} {getattr(item, 'mime_type', '')}]".replace(" ]", "]")


def server_label(server: Any) -> str:
    command = getattr(server, "command", None)
    if command is not None:
        return " ".join([command, *getattr(server, "args", [])])
    return server if isinstance(server, str) else type(server).__name__


def check_servers(servers: Sequence[Any] | None) -> tuple[Any, ...]:
    """What ``mcp.Client`` connects to, for each of ``servers`` (a command list becomes stdio
    parameters); ``ConfigError`` for anything else, or when the ``mcp`` SDK is not installed."""
    if not servers:
        return ()
    if isinstance(servers, (str, bytes)) or not isinstance(servers, Sequence):
        raise ConfigError("mcp_servers takes a list of servers: URLs, commands, StdioServerParameters")
    try:
        from mcp import StdioServerParameters
        from mcp.server import Server
        from mcp.server.mcpserver import MCPServer
    except ImportError as exc:
        raise ConfigError(f"mcp_servers needs the mcp SDK: {install_hint('serve')}") from exc
    checked = []
    for server in servers:
        if isinstance(server, (list, tuple)) and server and all(isinstance(p, str) for p in server):
            server = StdioServerParameters(command=server[0], args=list(server[1:]))
        elif isinstance(server, str) and not server.startswith(("http://", "https://")):
            raise ConfigError(f"an MCP server URL starts with http:// or https://, got {server!r}")
        elif not isinstance(server, (str, StdioServerParameters, Server, MCPServer)):
            raise ConfigError(
                "an MCP server is a URL, a command (a list of strings), an mcp.StdioServerParameters "
                f"or an MCPServer, got {type(server).__name__}"
            )
        checked.append(server)
    return tuple(checked)


class McpConnection:
    """One open server. A task of its own holds the SDK's client from connect to close (its
    context must be entered and left in one task), while calls come from any task of the loop."""

    def __init__(self, server: Any):
        self.server, self.label = server, server_label(server)
        self.client: Any = None
        self.tools: list[Any] = []
        self._ready, self._closing = asyncio.Event(), asyncio.Event()
        self._error: BaseException | None = None
        self._owner: asyncio.Task | None = None

    async def open(self) -> McpConnection:
        self._owner = asyncio.ensure_future(self._hold())
        try:
            await asyncio.wait_for(self._ready.wait(), CONNECT_TIMEOUT_S)
        except TimeoutError:
            await self.close()
            raise McpServerError(
                f"MCP server {self.label} did not list its tools in {CONNECT_TIMEOUT_S:.0f} s"
            ) from None
        except BaseException:  # cancelled while connecting: the server is not left running
            await asyncio.shield(self.close())
            raise
        if self._error is not None:
            await self.close()
            raise McpServerError(
                f"MCP server {self.label} could not be reached: {self._error}"
            ) from self._error
        return self

    async def _hold(self) -> None:
        from mcp import Client

        try:
            async with Client(self.server) as client:
                self.client, cursor = client, None
                while True:  # every page of the listing
                    listed = await client.list_tools(cursor=cursor)
                    self.tools += listed.tools
                    cursor = listed.next_cursor
                    if not cursor:
                        break
                self._ready.set()
                await self._closing.wait()
        except Exception as exc:  # noqa: BLE001 - reported by open(), which the run raises
            self._error = exc
        finally:
            self._ready.set()

    async def call(self, name: str, arguments: dict[str, Any]) -> Any:
        if self.client is None or self._closing.is_set():
            raise RuntimeError(f"MCP server {self.label} is closed")
        return await self.client.call_tool(name, arguments)

    async def close(self) -> None:
        self._closing.set()
        if self._owner is not None:
            if not self._ready.is_set():  # still connecting: stop it where it is
                self._owner.cancel()
            await asyncio.gather(self._owner, return_exceptions=True)


async def connect(servers: Sequence[Any], taken: set[str]) -> tuple[list[McpConnection], dict[str, McpTool]]:
    """Open every server at once; their tools by name (``ConfigError`` when a tool's name is taken,
    by another server's tool or by ``taken``: the REPL's own functions, the inputs)."""
    opened = await asyncio.gather(*(McpConnection(s).open() for s in servers), return_exceptions=True)
    connections = [c for c in opened if isinstance(c, McpConnection)]
    failed = [c for c in opened if isinstance(c, BaseException)]
    tools: dict[str, McpTool] = {}
    try:
        if failed:
            raise failed[0]
        for connection in connections:
            for tool in connection.tools:
                if tool.name in taken or tool.name in tools or not tool.name.isidentifier():
                    raise ConfigError(
                        f"MCP tool {tool.name!r} of {connection.label} cannot be a REPL function: "
                        "the name is taken or not a Python identifier"
                    )
                tools[tool.name] = McpTool(
                    name=tool.name,
                    server=connection.label,
                    description=tool.description or "",
                    schema=dict(tool.input_schema or {"type": "object"}),
                    connection=connection,
                )
    except BaseException:
        await close_all(connections)
        raise
    return connections, tools


async def close_all(connections: Sequence[McpConnection]) -> None:
    await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)


def reply_text(value: Any) -> str:
    """A tool's result as the trajectory keeps it."""
    return value if isinstance(value, str) else json.dumps(value, default=str)


__all__ = ["McpConnection", "McpTool", "check_servers", "close_all", "connect", "reply_text", "server_label"]

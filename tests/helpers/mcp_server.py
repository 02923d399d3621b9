"""A small MCP server for tests, over stdio: ``python -m tests.helpers.mcp_server``.

Its tools: ``lookup_host`` (a structured result), ``count_words`` (a bare int), ``shout`` (text), and
``fail`` (reports a tool error). It ends when its client closes stdin."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

HOSTS = {"web-1": {"ip": "10.0.0.1", "role": "web"}, "db-1": {"ip": "10.0.0.9", "role": "database"}}

server = MCPServer(name="test-hosts", log_level="WARNING")


class Host(BaseModel):
    name: str
    ip: str | None = None
    role: str | None = None


@server.tool()
def lookup_host(name: str) -> Host:
    """Look up a host of the inventory by name."""
    return Host(name=name, **HOSTS.get(name, {}))


@server.tool()
def count_words(text: str, minimum: Annotated[int, Field(ge=1)] = 1) -> int:
    """Count the words of text at least `minimum` characters long."""
    return sum(1 for word in text.split() if len(word) >= minimum)


@server.tool()
def shout(text: str) -> str:
    """The text in capitals."""
    return text.upper()


@server.tool()
def fail(reason: str) -> str:
    """Always fails with the reason."""
    raise ToolError(reason)


if __name__ == "__main__":
    server.run("stdio")

"""``rlmkit mcp``: a program served as MCP tools (the 2026-07-28 revision), over stdio or
Streamable HTTP.

    program_tools.py   the tools: one call, and a live REPL behind a server-minted handle
    tasks.py           the Tasks extension: a long run polled, and stopped between turns
    server.py          the SDK's MCPServer of a program; stdio, and HTTP at /mcp (a key beyond loopback)

The other direction, a run calling MCP servers' tools from its REPL, is ``rlmkit.run.mcp_tools``.
"""

from __future__ import annotations

from rlmkit.serve.mcp.server import http_app, mcp_server, run_http, run_stdio

__all__ = ["http_app", "mcp_server", "run_http", "run_stdio"]

"""The MCP server of a program (the ``mcp`` SDK's ``MCPServer``), over stdio or Streamable HTTP.

Both transports speak the 2026-07-28 revision, as the SDK serves it: no ``initialize``
handshake (every request carries its version and capabilities), no protocol sessions,
``server/discover``; clients of the handshake-era revisions are still answered (the SDK serves
both on one connection, the client's first request decides). What the revision leaves to the
server is here: cache hints on ``server/discover`` and the lists (the tools never change while
the server runs), the Tasks extension (``tasks.py``), and REPL handles (``program_tools.py``)
where protocol sessions used to keep state.

Over HTTP the endpoint is ``/mcp``, served without protocol sessions (``stateless_http``: a
handshake-era client gets no ``Mcp-Session-Id`` either). On loopback the SDK checks ``Host`` and
``Origin`` (a page in a browser cannot drive the server); beyond loopback a key is required
(``check_exposure``, the rule ``rlmkit serve`` has), sent as ``Authorization: Bearer <key>``
and checked by the SDK's bearer middleware.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
from collections.abc import AsyncIterator
from typing import Any

from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.caching import CacheHint
from mcp.server.mcpserver import MCPServer
from mcp_types.methods import CacheableMethod

import rlmkit
from rlmkit.serve.mcp.program_tools import program_tools, tool_error
from rlmkit.serve.mcp.tasks import TasksExtension, TaskStore
from rlmkit.serve.program import Program
from rlmkit.serve.server import check_exposure, serve_forever
from rlmkit.serve.sessions import Sessions

MCP_PATH = "/mcp"
# The tools, their schemas and the server's capabilities are fixed for the server's life, and
# the same for every caller: an hour, shared.
LIST_HINT = CacheHint(ttl_ms=3_600_000, scope="public")
LISTED: tuple[CacheableMethod, ...] = (
    "server/discover",
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
)
KEY_CLIENT = "api-key"  # the one principal a static key names
INSTRUCTIONS = (
    "{name} answers over inputs of any length: give long text by path (the *_path arguments). "
    "{name}_open loads inputs once into a live REPL and returns its handle; {name}_ask asks it "
    "again and again, keeping what earlier calls computed; {name}_close ends it. A client that "
    "declares the io.modelcontextprotocol/tasks extension gets long calls as tasks: poll them "
    "with tasks/get, stop them between turns with tasks/cancel."
)


class KeyVerifier:
    """The SDK's ``TokenVerifier`` for one static key (``hmac.compare_digest``: no timing leak)."""

    def __init__(self, key: str):
        self._key = key.encode()

    async def verify_token(self, token: str) -> AccessToken | None:
        if not hmac.compare_digest(token.encode(), self._key):
            return None
        return AccessToken(token=token, client_id=KEY_CLIENT, scopes=[])


def _auth(api_key: str | None, host: str, port: int) -> dict[str, Any]:
    """``MCPServer``'s bearer settings for a key (none: no key asked). The SDK's ``AuthSettings``
    names an OAuth issuer; a static key has none: with no authorization server and no resource
    URL the SDK serves no OAuth routes and reads the issuer nowhere, so it is this server."""
    if api_key is None:
        return {}
    settings = AuthSettings(issuer_url=f"http://{host}:{port}", resource_server_url=None)  # type: ignore[arg-type]
    return {"auth": settings, "token_verifier": KeyVerifier(api_key)}


def mcp_server(
    program: Program,
    *,
    idle_timeout: float | None = 900.0,
    max_sessions: int = 16,
    max_tasks: int = 16,
    **auth: Any,
) -> MCPServer[Any]:
    """The program's tools (``program_tools``), its tasks and its REPL handles, ended with the
    server. ``auth``: ``_auth``'s settings (HTTP with a key)."""
    sessions = Sessions(program.rlm, idle_timeout=idle_timeout, max_live=max_sessions)
    tasks = TaskStore(max_running=max_tasks)
    tools = program_tools(program, sessions)

    @contextlib.asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[dict[str, Any]]:
        reaper = asyncio.create_task(sessions.reap_forever())
        try:
            yield {}
        finally:
            reaper.cancel()
            await tasks.close_all()  # runs first: a task's REPL is one of the sessions
            await sessions.close_all()

    hints: dict[CacheableMethod, CacheHint] = {method: LIST_HINT for method in LISTED}
    server: MCPServer[Any] = MCPServer(
        name=f"rlmkit-{program.name}",
        version=rlmkit.__version__,
        instructions=INSTRUCTIONS.format(name=program.name),
        log_level="WARNING",
        lifespan=lifespan,
        cache_hints=hints,
        extensions=[TasksExtension(tasks, [n for n, t in tools.items() if t.as_task], tool_error)],
        **auth,
    )
    for name, tool in tools.items():
        server.add_tool(
            tool.function,
            name=name,
            description=tool.description,
            annotations=tool.annotations,
            structured_output=True,  # {"result": text}: clients may check it against its outputSchema
        )
    return server


def run_stdio(program: Program, **options: Any) -> None:
    """``options``: ``mcp_server``'s (``idle_timeout``, ``max_sessions``, ``max_tasks``)."""
    mcp_server(program, **options).run("stdio")


def http_app(
    program: Program, *, host: str = "127.0.0.1", port: int = 8000, api_key: str | None = None, **options: Any
) -> Any:
    """The Streamable HTTP app (Starlette) at ``/mcp``; ``api_key`` required beyond loopback."""
    check_exposure(host, api_key)
    server = mcp_server(program, **options, **_auth(api_key, host, port))
    return server.streamable_http_app(streamable_http_path=MCP_PATH, stateless_http=True, host=host)


def run_http(
    program: Program, *, host: str = "127.0.0.1", port: int = 8000, api_key: str | None = None, **options: Any
) -> None:
    """Serve until SIGTERM or Ctrl-C, as ``rlmkit serve`` does (``serve_forever``)."""
    app = http_app(program, host=host, port=port, api_key=api_key, **options)
    serve_forever(app, host=host, port=port, api_key=api_key)

"""Serving an RLM program: the OpenAI-compatible API (``app``, ``rlmkit serve``) and MCP over
stdio (``rlmkit mcp``). The top floor beside ``rlmkit/cli``: it calls the public ``RLM`` and
``Session`` API and nothing below it calls it.

Rooms: ``openai/`` (chat completions and the Responses API: requests, calls, their streams, the
routes), ``replicas/`` (``rlmkit serve --replicas``: Ray Serve, the session-affinity router, the
hop to a replica), MCP (``mcp_tool.py``); shared here: the app's assembly (``asgi.py``,
``state.py``, ``http.py``), the program, sessions and which one a request runs in
(``session_choice.py``), errors, admission, the access log, operations and the server.

    api = rlmkit.serve.app(rlm, api_key="...")        # a FastAPI app: run it, or mount it
    with rlmkit.serve.running(api) as url: ...        # uvicorn on 127.0.0.1 in a thread (tests)
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "app": "rlmkit.serve.asgi",
    "ServeOptions": "rlmkit.serve.state",
    "load_program": "rlmkit.serve.program",
    "Program": "rlmkit.serve.program",
    "running": "rlmkit.serve.server",
    "serve_forever": "rlmkit.serve.server",
    "run_stdio": "rlmkit.serve.mcp_tool",
}

__all__ = sorted(_EXPORTS)


SERVE_PACKAGES = ("fastapi", "starlette", "uvicorn", "openai", "sse_starlette", "mcp", "prometheus_client")


def __getattr__(name: str) -> Any:  # FastAPI is imported when the app is made, not with rlmkit
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'rlmkit.serve' has no attribute {name!r}")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in SERVE_PACKAGES:
            raise
        from rlmkit.errors import ConfigError, install_hint

        raise ConfigError(
            f"serving needs the optional extra ({exc.name} is missing): {install_hint('serve')}"
        ) from exc
    return getattr(module, name)

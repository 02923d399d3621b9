"""Serving an RLM program: the OpenAI-compatible API (``app``, ``rlmkit serve``) and MCP over
stdio (``rlmkit mcp``). The top floor beside ``rlmkit/cli``: it calls the public ``RLM`` and
``Session`` API and nothing below it calls it.

    api = rlmkit.serve.app(rlm, api_key="...")        # a FastAPI app: run it, or mount it
    with rlmkit.serve.running(api) as url: ...        # uvicorn on 127.0.0.1 in a thread (tests)
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "app": "rlmkit.serve.asgi",
    "ServeOptions": "rlmkit.serve.asgi",
    "load_program": "rlmkit.serve.program",
    "Program": "rlmkit.serve.program",
    "running": "rlmkit.serve.server",
    "serve_forever": "rlmkit.serve.server",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:  # FastAPI is imported when the app is made, not with rlmkit
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'rlmkit.serve' has no attribute {name!r}")
    return getattr(importlib.import_module(module_name), name)

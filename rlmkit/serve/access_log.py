"""One structured access-log line per request, on the ``rlmkit.serve.access`` logger.

    {"request_id": "…", "method": "POST", "path": "/v1/chat/completions", "status": 200,
     "ms": 41.2, "session_id": null, "runs": ["…"], "calls": 3, "tokens": 812, "cost": 0.0}

Ids, status, time and usage: never the prompt, the inputs or the answer, and never a header
(the API key is one). A client's ``X-Request-Id`` is kept (a proxy's id then joins its logs);
otherwise one is made, and the response carries it either way. A streamed response is logged
when its last byte is sent, or when the client goes away (status 499).

The same numbers go to the app's Prometheus metrics (``operations.Metrics``), by route template.

A pure ASGI middleware (not Starlette's ``BaseHTTPMiddleware``): it adds no task per request
and leaves a streamed body alone.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from typing import Any

from rlmkit.serve.operations import route_of

log = logging.getLogger("rlmkit.serve.access")


class AccessLog:
    def __init__(self, app: Any, metrics: Any = None):
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers") or ()).get(b"x-request-id", b"").decode("latin-1")
        request_id = given if 0 < len(given) <= 128 and given.isprintable() else uuid.uuid4().hex
        state = scope.setdefault("state", {})
        state["request_id"] = request_id
        started = time.perf_counter()
        status = 0

        async def send_with_id(message: dict) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", ()), (b"x-request-id", request_id.encode())]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except BaseException:
            status = status or 500  # a bug's 500 is written by the middleware outside this one
            raise
        finally:
            seconds = time.perf_counter() - started
            call = state.get("call")
            status = (call.status if call is not None and call.status != 200 else status) or 499
            if self.metrics is not None:
                usage = call.usage if call is not None else None
                self.metrics.observe(route_of(scope), scope.get("method", ""), status, seconds, usage)
            if log.isEnabledFor(logging.INFO):
                log.info(json.dumps(_line(scope, call, request_id, status, seconds)))


def _line(scope: dict, call: Any, request_id: str, status: int, seconds: float) -> dict[str, Any]:
    line: dict[str, Any] = {
        "request_id": request_id,
        "method": scope.get("method"),
        "path": scope.get("path"),
        "status": status,
        "ms": round(seconds * 1000, 1),
    }
    if call is not None:
        usage = call.usage
        line.update(
            session_id=call.session_id,
            runs=call.run_ids,
            calls=usage.calls,
            tokens=usage.total_tokens,
            cost=round(usage.cost, 6),
        )
    return line

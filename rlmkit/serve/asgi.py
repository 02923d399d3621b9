"""The ASGI app: an RLM program behind OpenAI's chat completions and Responses APIs (FastAPI).

    from rlmkit.serve import app
    api = app(rlmkit.RLM("context, question -> answer", lm=...), api_key="...")
    # uvicorn.run(api), or mount it: parent.mount("/rlm", api)

    api = app(load=lambda: build_my_program(), name="triage")   # listens now, loads in a thread

Routes: ``GET /v1/models``, ``POST /v1/chat/completions`` (``stream``: server-sent events),
``POST /v1/responses`` (the Responses API), ``GET`` and ``DELETE /v1/responses/{id}``
(``openai/``), ``POST /v1/sessions``, ``GET`` and ``DELETE /v1/sessions/{id}``
(``session_routes.py``), ``GET /metrics``, and, with no key (for a load balancer), ``GET /health``,
``/health/live`` and ``/health/ready`` (``health_routes.py``). Every other route takes
``Authorization: Bearer <api_key>`` when the app has a key. Here the app is assembled: what the
routes share (``ServeState``), the lifespan, the routers and the error handlers.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import Response

from rlmkit.serve import health_routes, session_routes
from rlmkit.serve.access_log import AccessLog
from rlmkit.serve.errors import APIError, bad_request, from_exception
from rlmkit.serve.http import authorize
from rlmkit.serve.openai import compact, responses, responses_routes, routes
from rlmkit.serve.program import Program, as_program
from rlmkit.serve.state import ServeOptions, ServeState

__all__ = ["ServeOptions", "app"]


def app(
    program: Any = None, *, name: str | None = None, load: Callable[[], Any] | None = None, **options: Any
) -> FastAPI:
    """The ASGI app serving ``program`` (an ``rlmkit.RLM``, a DSPy module holding one, or a
    ``Program`` from ``load_program``) as model ``name`` (default: the program's, else "rlmkit").
    Or ``load``, a function making the program, called in a thread once the app starts: the
    server answers at once, ``/health/ready`` (and any call) with 503 until it returns.
    ``options`` are ``ServeOptions``' fields."""
    if (program is None) == (load is None):
        raise TypeError("app() takes a program or load=, one of them")
    state = ServeState.made(ServeOptions(**options))

    def serve(made: Any) -> None:
        found = made if isinstance(made, Program) else as_program(made, name or "rlmkit")
        if name is not None:
            found.name = name
        state.serve(found)

    if program is not None:
        serve(program)

    async def load_in_thread(load: Callable[[], Any]) -> None:
        try:
            serve(await asyncio.to_thread(load))
        except Exception as exc:  # noqa: BLE001 - readiness says so; `rlmkit serve` stops on it
            state.readiness.failed(exc)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await asyncio.to_thread(responses.warm)  # before the first request, not in it
        loading = asyncio.create_task(load_in_thread(load)) if load is not None else None
        reaper = asyncio.create_task(state.sessions.reap_forever())
        try:
            yield
        finally:
            reaper.cancel()
            await state.background.close()  # cancelled between turns, each response kept as it ended
            if loading is not None and not loading.done():
                loading.cancel()  # the thread finishes its load; nothing is served from it
            await state.sessions.close_all()  # each has checkpointed after its last call already

    api = FastAPI(title=f"rlmkit: {name or 'rlmkit'}", lifespan=lifespan, docs_url=None, redoc_url=None)
    api.state.serve = state
    api.state.sessions = state.sessions  # what tests and operators look at most
    api.include_router(health_routes.open_router)
    keyed = APIRouter(dependencies=[Depends(authorize)])  # every route but health's
    routers = (
        health_routes.keyed,
        routes.router,
        compact.router,
        responses_routes.router,
        session_routes.router,
    )
    for router in routers:
        keyed.include_router(router)
    api.include_router(keyed)
    add_error_handlers(api)
    api.add_middleware(AccessLog, metrics=state.metrics)
    return api


def add_error_handlers(api: FastAPI) -> None:
    """Every failure in OpenAI's error shape."""

    @api.exception_handler(APIError)
    async def api_error(_: Request, exc: APIError) -> Response:
        return exc.response()

    @api.exception_handler(HTTPException)
    async def http_error(_: Request, exc: HTTPException) -> Response:  # unknown route, wrong method
        kind = "not_found" if exc.status_code == 404 else "invalid_request"
        return APIError(exc.status_code, str(exc.detail), code=kind).response()

    @api.exception_handler(RequestValidationError)
    async def validation_error(_: Request, exc: RequestValidationError) -> Response:
        return bad_request(str(exc.errors()[0].get("msg", exc))).response()

    @api.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> Response:
        return from_exception(exc).response()

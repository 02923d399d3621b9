"""The ASGI app: an RLM program behind OpenAI's chat completions and Responses APIs (FastAPI).

    from rlmkit.serve import app
    api = app(rlmkit.RLM("context, question -> answer", lm=...), api_key="...")
    # uvicorn.run(api), or mount it: parent.mount("/rlm", api)

    api = app(load=lambda: build_my_program(), name="triage")   # listens now, loads in a thread

Routes: ``GET /v1/models``, ``POST /v1/chat/completions`` (``stream``: server-sent events),
``POST /v1/responses`` (the Responses API), ``GET`` and ``DELETE /v1/responses/{id}``,
``POST /v1/sessions``, ``GET`` and ``DELETE /v1/sessions/{id}``, ``GET /metrics``, and, with no
key (for a load balancer), ``GET /health``, ``/health/live`` and ``/health/ready``. Every other
route takes ``Authorization: Bearer <api_key>`` when the app has a key. Bodies are read here, not
by FastAPI's models, so a bad one gets OpenAI's error shape.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from openai.types import Model
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse, Response

from rlmkit.serve import responses
from rlmkit.serve.access_log import AccessLog
from rlmkit.serve.admission import Admission
from rlmkit.serve.chat import Call, CallRecord
from rlmkit.serve.errors import APIError, bad_request, from_exception
from rlmkit.serve.mapping import check_inputs, parse_request
from rlmkit.serve.operations import Metrics, Readiness
from rlmkit.serve.program import Program, as_program
from rlmkit.serve.responses_routes import add_responses_routes
from rlmkit.serve.routing import in_call, known_model, openai_errors, streamed, unless_disconnected
from rlmkit.serve.sessions import OPEN_SESSION_HEADER, Sessions

SESSION_HEADER = "x-rlmkit-session"
MAX_BODY_BYTES = 64 * 2**20  # a long context is the point; a body past this is a 413


@dataclass(frozen=True)
class ServeOptions:
    """Everything the app can be told; ``rlmkit serve``'s flags are these."""

    api_key: str | None = None
    max_body_bytes: int = MAX_BODY_BYTES
    max_running: int = 16
    max_waiting: int = 64
    sessions_dir: str | None = None
    session_idle_timeout: float | None = 900.0
    max_sessions: int = 64
    max_stored_responses: int = responses.MAX_STORED


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
    settings = ServeOptions(**options)
    admission = Admission(settings.max_running, settings.max_waiting)
    sessions = Sessions(
        None,
        directory=settings.sessions_dir,
        idle_timeout=settings.session_idle_timeout,
        max_live=settings.max_sessions,
    )
    readiness = Readiness()
    metrics = Metrics(admission, sessions, readiness)
    kept = responses.StoredResponses(settings.max_stored_responses)
    served: dict[str, Program] = {}

    def serve(made: Any) -> None:
        found = made if isinstance(made, Program) else as_program(made, name or "rlmkit")
        if name is not None:
            found.name = name
        served["program"], sessions.rlm = found, found.rlm
        readiness.loaded()

    if program is not None:
        serve(program)

    def loaded() -> Program:
        readiness.check()
        return served["program"]

    async def load_in_thread() -> None:
        try:
            serve(await asyncio.to_thread(load))
        except Exception as exc:  # noqa: BLE001 - readiness says so; `rlmkit serve` stops on it
            readiness.failed(exc)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI):
        await asyncio.to_thread(responses.warm)  # before the first request, not in it
        loading = asyncio.create_task(load_in_thread()) if load is not None else None
        reaper = asyncio.create_task(sessions.reap_forever())
        try:
            yield
        finally:
            reaper.cancel()
            if loading is not None and not loading.done():
                loading.cancel()  # the thread finishes its load; nothing is served from it
            await sessions.close_all()  # each has checkpointed after its last call already

    api = FastAPI(title=f"rlmkit: {name or 'rlmkit'}", lifespan=lifespan, docs_url=None, redoc_url=None)
    api.state.sessions, api.state.admission = sessions, admission
    api.state.readiness, api.state.metrics = readiness, metrics
    api.state.served, api.state.responses = served, kept

    def authorize(request: Request) -> None:
        if settings.api_key is None:
            return
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.encode(), settings.api_key.encode()):
            raise APIError(
                401,
                "a valid API key is required: Authorization: Bearer <key>",
                type="authentication_error",
                code="invalid_api_key",
                headers={"WWW-Authenticate": "Bearer"},
            )

    async def read_json(request: Request) -> Any:
        limit = settings.max_body_bytes
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise APIError(413, f"the body is over {limit:,} bytes", code="body_too_large")
        body = bytearray()
        async for part in request.stream():
            body += part
            if len(body) > limit:
                raise APIError(413, f"the body is over {limit:,} bytes", code="body_too_large")
        try:
            return json.loads(body)
        except ValueError as exc:
            raise bad_request(f"malformed JSON: {exc}", code="invalid_json") from exc

    def model_card() -> Model:
        program = loaded()
        return Model(id=program.name, created=program.created, object="model", owned_by="rlmkit")

    @api.get("/health")
    @openai_errors
    async def health() -> dict[str, Any]:
        return {
            "status": "ok",
            **readiness.describe(),
            "running": admission.running,
            "waiting": admission.waiting,
            "sessions": len(sessions.live),
        }

    @api.get("/health/live")
    async def live() -> dict[str, Any]:
        return {"status": "ok"}

    @api.get("/health/ready")
    async def ready() -> Response:
        return JSONResponse(readiness.describe(), status_code=200 if readiness.ready else 503)

    keyed = APIRouter(dependencies=[Depends(authorize)])  # every route but health's

    @keyed.get("/metrics")
    @openai_errors
    async def scrape() -> Response:
        body, content_type = metrics.render()
        return Response(body, media_type=content_type)

    @keyed.get("/v1/models")
    @openai_errors
    async def list_models() -> dict[str, Any]:
        return {"object": "list", "data": [model_card().model_dump()]}

    @keyed.get("/v1/models/{model_id}")
    @openai_errors
    async def get_model(model_id: str) -> dict[str, Any]:
        known_model(loaded(), model_id)
        return model_card().model_dump()

    @keyed.post("/v1/chat/completions")
    @openai_errors
    async def chat_completions(request: Request) -> Response:
        program = loaded()
        chat = parse_request(await read_json(request))
        known_model(program, chat.model)
        record = CallRecord(request_id=request.state.request_id)
        request.state.call = record
        session_id = chat.session or request.headers.get(SESSION_HEADER)
        session = await sessions.get(session_id) if session_id else None
        record.session_id = session_id
        if session_id in sessions.in_call:  # said now, not as an error inside a stream already begun
            raise APIError(409, "this session is running another call", code="session_busy", param="session")
        call = Call(program, chat, record, session)
        if chat.stream:
            return streamed(admission, sessions, session_id, call.events())
        async with admission.slot(), in_call(sessions, session_id):
            body = await unless_disconnected(request, call.answer())
            return Response(body, media_type="application/json")

    add_responses_routes(
        keyed, loaded=loaded, read_json=read_json, sessions=sessions, admission=admission, kept=kept
    )

    @keyed.post("/v1/sessions")
    @openai_errors
    async def open_session(request: Request) -> Response:
        program = loaded()
        body = await read_json(request)
        if not isinstance(body, dict) or set(body) - {"inputs"}:
            raise bad_request("a session is opened with {'inputs': {...}}", param="inputs")
        inputs = check_inputs(program, body.get("inputs") or {})
        session = await sessions.open(inputs, session_id=request.headers.get(OPEN_SESSION_HEADER))
        request.state.call = CallRecord(request_id=request.state.request_id, session_id=session.id)
        return JSONResponse(sessions.describe(session), status_code=201)

    @keyed.get("/v1/sessions/{session_id}")
    @openai_errors
    async def get_session(session_id: str) -> dict[str, Any]:
        loaded()
        return sessions.describe(await sessions.get(session_id))

    @keyed.delete("/v1/sessions/{session_id}")
    @openai_errors
    async def delete_session(session_id: str) -> dict[str, Any]:
        loaded()
        await sessions.delete(session_id)
        return {"id": session_id, "object": "session", "deleted": True}

    api.include_router(keyed)

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

    api.add_middleware(AccessLog, metrics=metrics)
    return api

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
import functools
import hmac
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from openai.types import Model
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse, Response, StreamingResponse

from rlmkit.errors import ConfigError
from rlmkit.serve import responses
from rlmkit.serve.access_log import AccessLog
from rlmkit.serve.admission import Admission
from rlmkit.serve.chat import Call, CallRecord
from rlmkit.serve.errors import APIError, bad_request, from_exception
from rlmkit.serve.mapping import check_inputs, map_inputs, parse_request, question_field_of
from rlmkit.serve.operations import Metrics, Readiness
from rlmkit.serve.program import Program, as_program
from rlmkit.serve.sessions import Sessions

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
    @_openai_errors
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
    @_openai_errors
    async def scrape() -> Response:
        body, content_type = metrics.render()
        return Response(body, media_type=content_type)

    @keyed.get("/v1/models")
    @_openai_errors
    async def list_models() -> dict[str, Any]:
        return {"object": "list", "data": [model_card().model_dump()]}

    @keyed.get("/v1/models/{model_id}")
    @_openai_errors
    async def get_model(model_id: str) -> dict[str, Any]:
        _known_model(loaded(), model_id)
        return model_card().model_dump()

    @keyed.post("/v1/chat/completions")
    @_openai_errors
    async def chat_completions(request: Request) -> Response:
        program = loaded()
        chat = parse_request(await read_json(request))
        _known_model(program, chat.model)
        record = CallRecord(request_id=request.state.request_id)
        request.state.call = record
        session_id = chat.session or request.headers.get(SESSION_HEADER)
        session = await sessions.get(session_id) if session_id else None
        record.session_id = session_id
        if session_id in sessions.in_call:  # said now, not as an error inside a stream already begun
            raise APIError(409, "this session is running another call", code="session_busy", param="session")
        call = Call(program, chat, record, session)
        if chat.stream:
            admission.check()  # a full queue is a 429 before any byte; the slot is taken as it streams
            return StreamingResponse(
                _admitted_stream(admission, sessions, call.record.session_id, call.events()),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},  # nginx: pass chunks on
            )
        async with admission.slot(), _in_call(sessions, session_id):
            body = await _unless_disconnected(request, call.answer())
            return Response(body, media_type="application/json")

    @keyed.post("/v1/responses")
    @_openai_errors
    async def create_response(request: Request) -> Response:
        program = loaded()
        asked = responses.parse(await read_json(request))
        _known_model(program, asked.chat.model)
        record = CallRecord(request_id=request.state.request_id)
        request.state.call = record
        session, first = await response_session(program, asked)
        opened = session.id if first is not None else None
        session_id = record.session_id = session.id if session is not None else None
        if session_id in sessions.in_call and opened is None:
            raise APIError(409, "this session is running another call", code="session_busy", param="session")
        try:
            call = responses.ResponsesCall(Call(program, asked.chat, record, session, first), asked)
        except BaseException:
            if opened is not None:  # its first call never ran: nothing to keep
                await sessions.delete(opened)
            raise

        def keep(body: dict[str, Any]) -> None:
            if asked.store:
                kept.put(call.id, responses.Stored(body, session_id))

        if asked.chat.stream:
            admission.check()  # a full queue is a 429 before any byte
            return StreamingResponse(
                _admitted_stream(admission, sessions, session_id, call.events(keep)),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )
        try:
            async with admission.slot(), _in_call(sessions, session_id):
                text, body = await _unless_disconnected(request, call.answer())
        except BaseException:
            if opened is not None:
                await sessions.delete(opened)
            raise
        keep(body)
        return Response(text, media_type="application/json")

    async def response_session(
        program: Program, asked: responses.ResponsesRequest
    ) -> tuple[Any, dict[str, Any] | None]:
        """The session a response runs in, and, when it was opened for it, the call's inputs. A
        follow-up runs in its previous response's session; a stored response of an RLM in a new
        one, holding every input of the call but its question, which the call is given."""
        previous = asked.previous_response_id
        if previous is not None:
            stored = kept.get(previous, param="previous_response_id")
            if stored.session_id is None:
                raise bad_request(
                    f"response {previous!r} kept no REPL to continue (stored without a session: run with "
                    "no budget, by a program that is an rlmkit.RLM with a worker sandbox)",
                    param="previous_response_id",
                )
            try:
                return await sessions.get(stored.session_id), None
            except APIError as exc:
                raise APIError(
                    404,
                    f"the REPL of response {previous!r} has ended (idle past the timeout, or ended to make "
                    "room): start again without previous_response_id",
                    code="response_not_found",
                    param="previous_response_id",
                ) from exc
        if asked.chat.session is not None:
            return await sessions.get(asked.chat.session), None
        if not asked.store or asked.chat.budget or not program.is_rlm:
            return None, None
        question = question_field_of(program, check_inputs(program, asked.chat.inputs))
        inputs = map_inputs(program, asked.chat)  # a request that cannot run opens nothing
        try:
            session = await sessions.open({k: v for k, v in inputs.items() if k != question}, evictable=True)
        except ConfigError:  # a sandbox that holds no session: answered, and kept without a REPL
            return None, None
        return session, {k: v for k, v in inputs.items() if k == question}

    @keyed.get("/v1/responses/{response_id}")
    @_openai_errors
    async def get_response(response_id: str) -> dict[str, Any]:
        loaded()
        return kept.get(response_id).body

    @keyed.delete("/v1/responses/{response_id}")
    @_openai_errors
    async def delete_response(response_id: str) -> dict[str, Any]:
        loaded()
        kept.delete(response_id)
        return {"id": response_id, "object": "response", "deleted": True}

    @keyed.post("/v1/sessions")
    @_openai_errors
    async def open_session(request: Request) -> Response:
        program = loaded()
        body = await read_json(request)
        if not isinstance(body, dict) or set(body) - {"inputs"}:
            raise bad_request("a session is opened with {'inputs': {...}}", param="inputs")
        session = await sessions.open(check_inputs(program, body.get("inputs") or {}))
        request.state.call = CallRecord(request_id=request.state.request_id, session_id=session.id)
        return JSONResponse(sessions.describe(session), status_code=201)

    @keyed.get("/v1/sessions/{session_id}")
    @_openai_errors
    async def get_session(session_id: str) -> dict[str, Any]:
        loaded()
        return sessions.describe(await sessions.get(session_id))

    @keyed.delete("/v1/sessions/{session_id}")
    @_openai_errors
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


def _known_model(program: Program, model: str) -> None:
    if model != program.name:
        raise APIError(
            404,
            f"the model {model!r} does not exist here; this server serves {program.name!r}",
            code="model_not_found",
            param="model",
        )


def _openai_errors(route: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """A route whose failures all reach the client as ``APIError`` responses. (A handler for
    ``Exception`` itself runs in Starlette's outermost middleware, which re-raises after
    answering, and uvicorn then drops the connection the client would reuse.)"""

    @functools.wraps(route)
    async def wrapped(*args: Any, **kwargs: Any) -> Any:
        try:
            return await route(*args, **kwargs)
        except APIError:
            raise
        except Exception as exc:  # noqa: BLE001 - each kind gets its status in from_exception
            raise from_exception(exc) from exc

    return wrapped


@contextlib.asynccontextmanager
async def _in_call(sessions: Sessions, session_id: str | None):
    """A session in a call is never ended as idle under it."""
    if session_id is None:
        yield
        return
    sessions.in_call.add(session_id)
    try:
        yield
    finally:
        sessions.in_call.discard(session_id)
        sessions.touch(session_id)


async def _admitted_stream(
    admission: Admission, sessions: Sessions, session_id: str | None, events: AsyncIterator[bytes]
) -> AsyncIterator[bytes]:
    """The events of a streamed call, once it has a slot (past the queue: a 429 before any byte)."""
    async with admission.slot(check=False), _in_call(sessions, session_id):
        async for event in events:
            yield event


async def _unless_disconnected(request: Request, work: Any) -> Any:
    """``work``'s result; if the client goes away first, the call is cancelled (its sandbox freed)."""
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
        if not task.done():
            task.cancel()
            request.state.call.status = 499
            with contextlib.suppress(BaseException):
                await task
            raise APIError(499, "the client closed the request", code="client_closed")
        return task.result()
    finally:
        gone.cancel()
        if not task.done():
            task.cancel()


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass

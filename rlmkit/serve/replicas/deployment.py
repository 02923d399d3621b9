"""``rlmkit serve --replicas N``: N replicas of one program behind one address, on Ray Serve.

    client -> Ray Serve's HTTP proxy -> FrontDoor (reads the body, names the session)
           -> SessionAffinityRouter (the session's replica; else the less busy of two)
           -> Replica (the same ASGI app as ``rlmkit serve``, run in process)

Each replica is the app ``rlmkit serve`` runs, with the same routes, API key, admission queue and
sessions; all of them checkpoint their sessions into one shared sessions directory after every
call. A call of a session reaches the replica holding its live REPL; when that replica is gone,
the replica its id ranks next loads the session from the directory (variables rebuilt as any
saved session's are) and answers. Every response says which replica answered it
(``X-RLMKit-Replica``).
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ray import serve
from ray.exceptions import ActorDiedError, ActorUnavailableError
from ray.serve.config import RequestRouterConfig
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from rlmkit.serve.asgi import app
from rlmkit.serve.errors import APIError
from rlmkit.serve.replicas.affinity_router import SessionAffinityRouter
from rlmkit.serve.replicas.forwarding import Forwarded, forwarded, respond

APP_NAME = "rlmkit"
REPLICA_HEADER = "x-rlmkit-replica"
TRIES = 3  # a replica found dead before it answered: the router drops it, the next one answers


class Replica:
    """One replica: the program, loaded in this process, behind the ASGI app."""

    async def __init__(self, load: Callable[[], Any], name: str, options: dict[str, Any]):
        program = await asyncio.to_thread(load)  # Ray Serve routes nothing here before it returns
        self.api = app(program, name=name, **options)
        self.lifespan = self.api.router.lifespan_context(self.api)
        await self.lifespan.__aenter__()  # the session reaper, the Responses warm-up
        self.replica_id = serve.get_replica_context().replica_id.unique_id

    async def handle(self, request: Forwarded):
        async for part in respond(self.api, request, [(REPLICA_HEADER, self.replica_id)]):
            yield part

    async def __del__(self) -> None:  # a replica stopped by Serve ends its sessions, each saved
        await self.lifespan.__aexit__(None, None, None)


class FrontDoor:
    """The one address: every request goes on to a replica as it came, its answer back as the
    replica writes it."""

    def __init__(self, replicas: Any):
        self.replicas = replicas.options(stream=True, method_name="handle")

    async def __call__(self, request: Request) -> Response:
        handed_on = forwarded(
            request.method,
            request.url.path,
            request.url.query.encode("latin-1"),
            list(request.headers.items()),
            await request.body(),
            (request.client.host, request.client.port) if request.client else None,
        )
        for attempt in range(TRIES):
            parts = self.replicas.remote(handed_on)
            try:
                status, headers = await parts.__anext__()
                break
            except (ActorDiedError, ActorUnavailableError):
                if attempt == TRIES - 1:
                    return APIError(
                        503,
                        "no replica could take the request; retry",
                        type="server_error",
                        code="replica_unavailable",
                        headers={"Retry-After": "1"},
                    ).response()
        response = StreamingResponse(parts)
        response.status_code = status
        response.raw_headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]
        return response


def application(load: Callable[[], Any], name: str, replicas: int, options: dict[str, Any]) -> Any:
    """The Ray Serve application: ``replicas`` replicas of the program behind one front door.
    ``options`` are ``ServeOptions``' fields; ``sessions_dir`` is required (the shared store)."""
    if not options.get("sessions_dir"):
        raise ValueError("replicas share their sessions through a sessions directory: give sessions_dir")
    waiting = options.get("max_running", 16) + options.get("max_waiting", 64)
    replica = serve.deployment(
        Replica,
        num_replicas=replicas,
        ray_actor_options={"num_cpus": 0},  # the work runs in each replica's sandbox workers
        max_ongoing_requests=waiting,  # past this, the app's own queue answers 429
        request_router_config=RequestRouterConfig(request_router_class=SessionAffinityRouter),
    )
    front = serve.deployment(
        FrontDoor, num_replicas=1, ray_actor_options={"num_cpus": 0}, max_ongoing_requests=waiting * replicas
    )
    return front.bind(replica.bind(load, name, options))


def start(
    load: Callable[[], Any],
    *,
    name: str,
    replicas: int,
    host: str,
    port: int,
    options: dict[str, Any],
) -> str:
    """Run the application on the Ray instance this process is connected to; its base URL."""
    serve.start(http_options={"host": host, "port": port})
    serve.run(application(load, name, replicas, options), name=APP_NAME, route_prefix="/")
    return f"http://{host}:{port}"


def runtime_env() -> dict[str, Any]:
    """Ray workers import what this process imports: the working folder (for ``module:attr``)
    and this process's import path, as ``PYTHONPATH``."""
    paths = [os.getcwd(), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {"env_vars": {"PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def running_replicas(
    load: Callable[[], Any],
    *,
    sessions_dir: str | Path,
    replicas: int = 2,
    name: str = "rlmkit",
    **options: Any,
) -> Iterator[str]:
    """``with running_replicas(load, sessions_dir=...) as url``: the replicas served on the Ray
    instance this process has started (``ray.init``), at 127.0.0.1 on a free port; Serve is shut
    down after the block (tests, benchmarks)."""
    url = start(
        load,
        name=name,
        replicas=replicas,
        host="127.0.0.1",
        port=free_port(),
        options={**options, "sessions_dir": str(sessions_dir)},
    )
    try:
        yield url
    finally:
        serve.shutdown()

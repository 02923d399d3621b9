"""Running the app under uvicorn: ``serve_forever`` (``rlmkit serve``) and ``running`` (a server
in a thread on 127.0.0.1 that stops when the block ends: tests, notebooks, benchmarks).

Beyond loopback an API key is required: a server any host can reach, with no key, would run
anyone's code-writing model on this machine's sandbox and model budget.

SIGTERM (and Ctrl-C) stop new connections and let calls in flight finish for ``grace`` seconds
(uvicorn's graceful shutdown), then the app's shutdown ends its sessions (saved, with a
sessions directory). An app that loads its program once it has started (``app(load=...)``)
is stopped by a load that fails, and ``serve_forever`` raises what the load raised.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

from rlmkit.errors import ConfigError, RLMKitError

LOOPBACK_NAMES = ("localhost",)


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def check_exposure(host: str, api_key: str | None) -> None:
    if not api_key and not is_loopback(host):
        raise ConfigError(
            f"binding {host} reaches beyond this machine: give --api-key (or RLMKIT_SERVE_API_KEY) "
            "so only clients holding the key can call the program"
        )


def _config(app: Any, host: str, port: int, grace: float | None, log_level: str) -> Any:
    import uvicorn

    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,  # rlmkit.serve.access writes one structured line per request instead
        timeout_graceful_shutdown=grace,
        lifespan="on",
    )


def serve_forever(
    app: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    api_key: str | None = None,
    grace: float = 30.0,
    log_level: str = "info",
) -> None:
    """Serve until SIGTERM or Ctrl-C (``api_key``: the key the app was built with, checked here
    against ``host``)."""
    import uvicorn

    check_exposure(host, api_key)
    access = logging.getLogger("rlmkit.serve.access")
    if not access.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        access.addHandler(handler)
        access.setLevel(logging.INFO)
    server = uvicorn.Server(_config(app, host, port, grace, log_level))
    shared = getattr(getattr(app, "state", None), "serve", None)  # rlmkit's app (ServeState), else None
    readiness = shared.readiness if shared is not None else None
    if readiness is not None:
        readiness.on_failure(lambda: setattr(server, "should_exit", True))
    server.run()
    if readiness is not None and readiness.error is not None:
        error = readiness.error
        if isinstance(error, RLMKitError):
            raise error
        raise ConfigError(f"the program could not be loaded: {type(error).__name__}: {error}") from error


@contextlib.contextmanager
def running(
    app: Any, *, host: str = "127.0.0.1", port: int = 0, grace: float = 5.0, startup_timeout: float = 30.0
) -> Iterator[str]:
    """``with running(app) as url``: the app served from a thread (port 0: a free one), its base
    URL (``http://127.0.0.1:PORT``) inside the block, stopped (calls in flight drained) after it."""
    import uvicorn

    server = uvicorn.Server(_config(app, host, port, grace, "warning"))
    thread = threading.Thread(target=server.run, name="rlmkit-serve", daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout
    while not server.started:  # set by uvicorn once its socket listens
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError(f"the server did not start on {host}:{port}")
        time.sleep(0.01)
    bound = server.servers[0].sockets[0].getsockname()
    try:
        yield f"http://{host}:{bound[1]}"
    finally:
        server.should_exit = True
        thread.join(grace + 10)

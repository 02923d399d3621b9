"""What a host's operators read: readiness, and Prometheus metrics (``prometheus-client``).

``GET /health/live`` is 200 while the process answers at all (restart it when it does not);
``GET /health/ready`` is 503 while the program is still loading (an embedded model being
assembled and started can take minutes) and 200 once it can take calls (send it traffic then).
Neither takes the API key: a load balancer or an orchestrator calls them. ``GET /metrics``
does take it (Prometheus sends it with ``authorization: {credentials: KEY}``).

The metrics, in Prometheus' text format, each on the app's own registry (two apps in one
process count apart):

    rlmkit_requests_total{route, method, status}     requests answered (route: the template,
                                                     e.g. /v1/sessions/{session_id}, never an id)
    rlmkit_request_duration_seconds{route}           to the last byte (a stream's last event)
    rlmkit_tokens_total{kind="prompt"|"completion"}  model tokens of served calls, whole call tree
    rlmkit_cost_dollars_total                        what they cost, where the models have a price
    rlmkit_model_calls_total                         model calls of served calls, whole call tree
    rlmkit_calls_running, rlmkit_calls_waiting       calls in a slot, and queued for one
    rlmkit_sessions_live                             sessions holding a REPL
    rlmkit_sandbox_workers{state}                    the sandbox worker pool: idle, starting, taken
    rlmkit_ready                                     1 once the program is loaded

Labels are routes, methods, statuses and kinds: never a prompt, an input, an answer or an id.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily

from rlmkit.serve.errors import APIError

log = logging.getLogger("rlmkit.serve")

# Seconds: a health check, an answer from a fast model, an RLM's minutes-long run.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
UNMATCHED = "unmatched"  # a path no route serves: one label for all of them, whatever was asked
LOADING_RETRY_S = 5


class Readiness:
    """Whether the program is loaded: set once, from the thread that loads it."""

    def __init__(self, ready: bool = False):
        self.error: BaseException | None = None
        self._done = threading.Event()
        self._on_failure: list[Callable[[], None]] = []
        if ready:
            self._done.set()

    @property
    def ready(self) -> bool:
        return self._done.is_set() and self.error is None

    def loaded(self) -> None:
        self._done.set()

    def failed(self, error: BaseException) -> None:
        self.error = error
        self._done.set()
        log.error("rlmkit serve: the program could not be loaded: %s: %s", type(error).__name__, error)
        for callback in self._on_failure:
            callback()

    def on_failure(self, callback: Callable[[], None]) -> None:
        """``callback()`` when the load fails (now, if it has): ``rlmkit serve`` then stops."""
        self._on_failure.append(callback)
        if self.error is not None:
            callback()

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)

    def check(self) -> None:
        """A call that needs the program is a 503 until it is loaded."""
        if self.ready:
            return
        if self.error is not None:
            raise APIError(503, "the program failed to load", type="server_error", code="load_failed")
        raise APIError(
            503,
            "the program is still loading; retry shortly (GET /health/ready says when it is ready)",
            type="server_error",
            code="loading",
            headers={"Retry-After": str(LOADING_RETRY_S)},
        )

    def describe(self) -> dict[str, Any]:
        if self.ready:
            return {"status": "ready"}
        if self.error is not None:
            return {"status": "failed", "error": type(self.error).__name__}
        return {"status": "loading"}


class Metrics:
    """The app's counters, histograms and gauges; ``observe`` is called once per request."""

    def __init__(self, admission: Any, sessions: Any, readiness: Readiness):
        self.registry = registry = CollectorRegistry()
        self.requests = Counter(
            "rlmkit_requests", "HTTP requests answered", ["route", "method", "status"], registry=registry
        )
        self.latency = Histogram(
            "rlmkit_request_duration_seconds",
            "Seconds from a request's arrival to its response's last byte",
            ["route"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.tokens = Counter(
            "rlmkit_tokens", "Model tokens of served calls, over each call tree", ["kind"], registry=registry
        )
        self.cost = Counter("rlmkit_cost_dollars", "Dollars the served calls' models cost", registry=registry)
        self.model_calls = Counter(
            "rlmkit_model_calls", "Model calls of served calls, over each call tree", registry=registry
        )
        gauges = {
            "rlmkit_calls_running": ("Calls running in a slot", lambda: admission.running),
            "rlmkit_calls_waiting": ("Calls queued for a slot", lambda: admission.waiting),
            "rlmkit_sessions_live": ("Sessions holding a live REPL", lambda: len(sessions.live)),
            "rlmkit_ready": ("1 once the program is loaded", lambda: int(readiness.ready)),
        }
        for name, (help_text, read) in gauges.items():
            Gauge(name, help_text, registry=registry).set_function(read)
        registry.register(_WorkerPool())

    def observe(self, route: str, method: str, status: int, seconds: float, usage: Any = None) -> None:
        self.requests.labels(route, method, str(status)).inc()
        self.latency.labels(route).observe(seconds)
        if usage is not None and usage.calls:
            self.tokens.labels("prompt").inc(usage.prompt_tokens)
            self.tokens.labels("completion").inc(usage.completion_tokens)
            self.cost.inc(usage.cost)
            self.model_calls.inc(usage.calls)

    def render(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class _WorkerPool:
    """The sandbox worker pool as it is at the scrape (the process's, shared by every RLM)."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from rlmkit.sandbox import pool

        family = GaugeMetricFamily("rlmkit_sandbox_workers", "Sandbox workers of the pool", labels=["state"])
        stats = pool.stats()
        for state in ("idle", "starting", "taken"):
            family.add_metric([state], stats[state])
        yield family

    def describe(self) -> list:
        return []  # collected at each scrape, never at registration


def route_of(scope: dict) -> str:
    """The route template that served a request (an id in the path stays out of labels)."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else UNMATCHED

"""OpenAI-compatible servers (OpenAI, vLLM, SGLang, llama.cpp, the embedded model) over HTTP/1.1.

One set of ``Lanes`` (keep-alive connections, ``http11.py``) per (event loop, base URL, pool
size), shared by every LM that talks to that server: connections stay open between calls,
and there are as many as the LM's concurrency so a burst of sub-calls never waits for a
socket. A pool belongs to one event loop (its connections do), so a new loop gets its own;
the entry goes away with the loop.

Why not httpx or httpcore: a request is one JSON POST. httpx's client layer doubled httpcore's
CPU per request, and httpcore's own machinery (h11, anyio cancel scopes, trace hooks) cost
more than the request: ``python benchmarks/speed/client_cost.py http`` gave ``rlmkit.LM.acomplete`` 1.13
ms of CPU per request on httpcore against 0.68 ms for raw asyncio sockets; every turn and every
sub-call of a fan-out pays it. Importing neither also shortens a cold start.
"""

from __future__ import annotations

import asyncio
import functools
import json
import ssl
import threading
import weakref
from typing import Any
from urllib.parse import urlsplit

from rlmkit.models.transports import http11
from rlmkit.models.transports.base import ModelReply, ModelRequest, ProviderError, retry_after_s

_lanes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, int], Lanes]] = (
    weakref.WeakKeyDictionary()
)  # loop -> {(url, pool): Lanes}
_lanes_lock = threading.Lock()
# What a lost, refused, garbled or stalled connection raises (TimeoutError and ssl.SSLError are
# OSErrors; IncompleteReadError is a connection closed mid-response): all retried like a 5xx.
NETWORK_ERRORS = (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, http11.ProtocolError)
KEEPALIVE_S = 60.0  # a connection idle longer is not reused (servers close theirs after 5-75 s)


class Lane:
    """One slot for a keep-alive connection, lent to one request at a time: connected on first
    use, and anew when its connection was closed or idled past ``KEEPALIVE_S``."""

    __slots__ = ("conn",)

    def __init__(self) -> None:
        self.conn: http11.Connection | None = None

    def drop(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


class Lanes:
    """Up to ``size`` lanes to one server. A lane is made when none is free, up to ``size``;
    then a request waits for one."""

    def __init__(self, base_url: str, size: int):
        self.base_url, self.size = base_url, size
        self.origin = http11.Origin.of(base_url)
        self._free: asyncio.Queue[Lane] = asyncio.Queue()
        self.made = 0

    async def take(self) -> Lane:
        while self._free.empty() and self.made < self.size:
            self.made += 1
            self._free.put_nowait(Lane())
        lane = await self._free.get()
        if lane.conn is not None and not lane.conn.usable(KEEPALIVE_S):
            lane.drop()
        return lane

    def give(self, lane: Lane) -> None:
        self._free.put_nowait(lane)

    async def post(self, lane: Lane, path: str, headers: dict[str, str], body: bytes) -> http11.Response:
        """POST on the lane's connection (made if it has none); on a new one if the kept one had
        gone stale while idle (the server closed it: the request never reached it)."""
        if lane.conn is not None:
            try:
                return await http11.post(lane.conn, self.origin, path, headers, body)
            except http11.StaleConnection:
                lane.drop()
        # plain http never does TLS: no CA bundle to load (50-200 ms) before a local server's first call
        tls = _ssl_context() if self.origin.scheme == "https" else None
        lane.conn = await http11.connect(self.origin, tls)
        return await http11.post(lane.conn, self.origin, path, headers, body)


def shared_client(base_url: str, pool: int) -> Lanes:
    """The running loop's lanes to ``base_url`` (made on first use)."""
    loop = asyncio.get_running_loop()
    with _lanes_lock:
        per_loop = _lanes.setdefault(loop, {})
        lanes = per_loop.get((base_url, pool))
        if lanes is None:
            lanes = per_loop[(base_url, pool)] = Lanes(base_url, pool)
        return lanes


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """Built once, with certifi's CA bundle when installed (as httpx would), else the system's."""
    try:
        import certifi
    except ImportError:
        return ssl.create_default_context()
    return ssl.create_default_context(cafile=certifi.where())


class OpenAITransport:
    """POST ``{base_url}/chat/completions`` with a bearer key; errors become ``ProviderError``."""

    name = "openai"

    def __init__(
        self, base_url: str, api_key: str | None, *, pool: int = 16, headers: dict[str, str] | None = None
    ):
        self.base_url = base_url.rstrip("/")
        self.pool = pool
        url = urlsplit(f"{self.base_url}/chat/completions")
        self._path = url.path + (f"?{url.query}" if url.query else "")
        self._headers = {"Content-Type": "application/json", **(headers or {})}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"

    def __repr__(self) -> str:  # never the headers: they hold the key
        return f"OpenAITransport({self.base_url!r})"

    async def complete(self, request: ModelRequest) -> ModelReply:
        body: dict[str, Any] = {"model": request.model, "messages": request.messages, **request.params}
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        if request.stop:
            body["stop"] = request.stop
        lanes = shared_client(self.base_url, self.pool)
        lane = await lanes.take()
        try:
            async with asyncio.timeout(request.timeout):
                response = await lanes.post(lane, self._path, self._headers, json.dumps(body).encode())
        except BaseException as exc:
            lane.drop()  # mid-request: nothing sane can follow on that connection
            if isinstance(exc, NETWORK_ERRORS):
                raise ProviderError(f"{type(exc).__name__}: {exc or 'no answer'}", network=True) from exc
            raise
        finally:
            lanes.give(lane)
        if response.status >= 400:
            raise ProviderError(
                f"HTTP {response.status}: {_error_detail(response)}",
                status=response.status,
                retry_after=retry_after_s(response.headers),
            )
        try:
            data = json.loads(response.body)
            choice = data["choices"][0]
        except (ValueError, KeyError, IndexError, TypeError):
            # a cut or garbled body from a live server is a server fault: retried like a 5xx
            raise ProviderError(
                f"unreadable response body ({len(response.body)} bytes)", status=502
            ) from None
        return parse_chat_response(data, choice, request.model)


# Any: a chat.completion body is JSON from the wire, read field by field with defaults.
def parse_chat_response(data: dict[str, Any], choice: dict[str, Any], model: str) -> ModelReply:
    usage = data.get("usage") or {}
    details = usage.get("prompt_tokens_details") or {}
    return ModelReply(
        text=(choice.get("message") or {}).get("content") or "",
        model=data.get("model") or model,
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        cached_prompt_tokens=int(details.get("cached_tokens") or 0),
        finish_reason=choice.get("finish_reason"),
    )


def _error_detail(response: http11.Response) -> str:
    text = response.body.decode("utf-8", "replace")
    try:
        error = json.loads(text).get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if error:
            return str(error)
    except (ValueError, AttributeError):
        pass
    return text[:200] or response.reason

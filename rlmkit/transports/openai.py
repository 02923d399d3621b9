"""OpenAI-compatible servers (OpenAI, vLLM, SGLang, llama.cpp, the embedded model) over httpcore.

One set of ``Lanes`` (keep-alive ``httpcore.AsyncHTTPConnection``s) per (event loop, base URL,
pool size), shared by every LM that talks to that server: connections stay open between
calls (keep-alive), and there are as many as the LM's concurrency so a burst of sub-calls never
waits for a socket. A pool belongs to one event loop (its connections do), so a new loop gets
its own; the entry goes away with the loop.

Why httpcore and not httpx on top of it: a request is one JSON POST, and httpx's client layer
(URL merging, cookies, auth and redirect hooks, its own Request/Response models) doubled the
CPU per request (1.37 vs 0.64 ms, ``benchmarks/http_clients.py``), which every turn and every
sub-call of a fan-out pays, and importing httpx added about 60 ms to a cold start.
"""

from __future__ import annotations

import asyncio
import functools
import json
import ssl
import threading
import weakref
from typing import Any

import httpcore

from rlmkit.transports.base import ModelReply, ModelRequest, ProviderError, retry_after_s

_lanes: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # loop -> {(url, pool): Lanes}
_lanes_lock = threading.Lock()
# What a lost, refused or stalled connection raises; all are retried like a 5xx.
NETWORK_ERRORS = (httpcore.TimeoutException, httpcore.NetworkError, httpcore.ProtocolError)


class Lanes:
    """Up to ``size`` keep-alive connections to one server, each lent to one request at a time.

    Not one pool of ``size`` connections: a pool costs more per request as requests queue in it
    (httpcore 1.0 walks every connection for every waiting request each time one frees up: 16
    requests at once to a server answering in 200 ms took 240-260 ms; as lanes, 227-233 ms, on 2
    loaded cores), and even a one-connection pool's bookkeeping is about 0.15 ms of CPU per
    request over a bare ``httpcore.AsyncHTTPConnection``. A lane is made when none is free, up
    to ``size``; then a request waits for one. A lane the server closed, or one idle past its
    keep-alive, is replaced when it is next taken.
    """

    def __init__(self, base_url: str, size: int):
        self.base_url, self.size = base_url, size
        self._origin = httpcore.URL(base_url).origin
        self._free: asyncio.Queue[httpcore.AsyncHTTPConnection] = asyncio.Queue()
        self.made = 0

    async def take(self) -> httpcore.AsyncHTTPConnection:
        while self._free.empty() and self.made < self.size:
            self.made += 1
            self._free.put_nowait(self._connection())
        lane = await self._free.get()
        if lane.is_closed() or lane.has_expired():
            await lane.aclose()
            lane = self._connection()
        return lane

    def give(self, lane: httpcore.AsyncHTTPConnection) -> None:
        self._free.put_nowait(lane)

    def _connection(self) -> httpcore.AsyncHTTPConnection:
        # plain http never does TLS: no CA bundle to load (50-200 ms) before a local server's first call
        tls = _ssl_context() if self._origin.scheme == b"https" else None
        return httpcore.AsyncHTTPConnection(
            self._origin, ssl_context=tls, keepalive_expiry=60, network_backend=_ONE_WRITE_BACKEND
        )


class OneWriteStream(httpcore.AsyncNetworkStream):
    """A connection's stream that sends a request in one write: httpcore writes the head and
    the body separately, and each write is a send() syscall that wakes the server. Writes are
    held until the next read (a request is always followed by reading its response), then sent
    together: about 0.13 ms less CPU per request (0.75 -> 0.62 ms on this project's 2-core VM),
    which every turn and every sub-call pays. A failed send surfaces at that read, as a network
    error like any other."""

    def __init__(self, inner: httpcore.AsyncNetworkStream):
        self._inner = inner
        self._held: list[bytes] = []
        self._write_timeout: float | None = None

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._held.append(buffer)
        self._write_timeout = timeout

    async def _send_held(self) -> None:
        if self._held:
            data = b"".join(self._held)
            self._held.clear()
            await self._inner.write(data, self._write_timeout)

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        await self._send_held()
        return await self._inner.read(max_bytes, timeout)

    async def aclose(self) -> None:
        self._held.clear()
        await self._inner.aclose()

    async def start_tls(self, ssl_context, server_hostname=None, timeout=None) -> OneWriteStream:
        await self._send_held()
        return OneWriteStream(await self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class OneWriteBackend(httpcore.AsyncNetworkBackend):
    """httpcore's anyio backend (what it picks on asyncio) with ``OneWriteStream`` connections."""

    def __init__(self) -> None:
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        stream = await self._inner.connect_tcp(host, port, timeout, local_address, socket_options)
        return OneWriteStream(stream)

    async def connect_unix_socket(self, path, timeout=None, socket_options=None):
        return OneWriteStream(await self._inner.connect_unix_socket(path, timeout, socket_options))

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


_ONE_WRITE_BACKEND = OneWriteBackend()


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

    def __init__(self, base_url: str, api_key: str | None, *, pool: int = 16, headers: dict | None = None):
        self.base_url = base_url.rstrip("/")
        self.pool = pool
        self._url = f"{self.base_url}/chat/completions"
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
        timeout = {
            "connect": request.timeout,
            "read": request.timeout,
            "write": request.timeout,
            "pool": None,
        }
        try:
            response = await lane.request(
                "POST",
                self._url,
                headers=self._headers,
                content=json.dumps(body).encode(),
                extensions={"timeout": timeout},
            )
        except NETWORK_ERRORS as exc:
            raise ProviderError(f"{type(exc).__name__}: {exc or 'no answer'}", network=True) from exc
        finally:
            lanes.give(lane)
        if response.status >= 400:
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in response.headers}
            raise ProviderError(
                f"HTTP {response.status}: {_error_detail(response)}",
                status=response.status,
                retry_after=retry_after_s(headers),
            )
        try:
            data = json.loads(response.content)
            choice = data["choices"][0]
        except (ValueError, KeyError, IndexError, TypeError):
            # a cut or garbled body from a live server is a server fault: retried like a 5xx
            raise ProviderError(
                f"unreadable response body ({len(response.content)} bytes)", status=502
            ) from None
        return parse_chat_response(data, choice, request.model)


def parse_chat_response(data: dict, choice: dict, model: str) -> ModelReply:
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


def _error_detail(response: httpcore.Response) -> str:
    text = response.content.decode("utf-8", "replace")
    try:
        error = json.loads(text).get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if error:
            return str(error)
    except (ValueError, AttributeError):
        pass
    return text[:200] or response.extensions.get("reason_phrase", b"").decode("latin-1")
